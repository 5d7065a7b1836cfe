package extender

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	json "github.com/goccy/go-json"
	corev1 "k8s.io/api/core/v1"
)

// extenderArgs is extenderv1.ExtenderArgs as it arrives on the wire (the same keys: the upstream
// type has no json tags), except that NodeNames is kept as its JSON text, for splitNodeNames.
type extenderArgs struct {
	Pod       *corev1.Pod
	Nodes     *corev1.NodeList
	NodeNames *json.RawMessage
}

// extenderCall is one filter or prioritize call's request, decoded arguments and the storage its
// answer is built in, all reused from call to call. The scheduler sends every candidate node's
// name on every call: at 5,000 nodes, decoding them into fresh strings and building the answer in
// fresh slices made 300-400 KB of garbage per call, and the collections that garbage caused set
// the slowest calls. Reused, a call's garbage is little more than its pod.
//
// What the gang manager is handed are ordinary strings: decode swaps each name, split out of the
// reused storage, for the string a nameTable keeps for it, so the manager may keep any of them.
// Everything else lives until release, which the handler calls once the answer is written.
type extenderCall struct {
	body bytes.Buffer
	args extenderArgs
	// rawNames is the NodeNames array's JSON text when the library decodes the request: it
	// appends the text into this storage.
	rawNames json.RawMessage
	// names are the candidate nodes, from NodeNames or the full Nodes.
	names []string
	// plainNames is true when every name encodes in JSON as itself between quotes, so answers
	// can copy names without looking at them again.
	plainNames bool
	// namesText is the NodeNames array as it arrived, when the fast path read it. It is part of
	// the reused storage: good until release.
	namesText string
	scores    []int64
	answer    []byte
}

var extenderCalls = sync.Pool{New: func() any { return new(extenderCall) }}

// maxPooledBytes bounds the storage a call keeps for the next one: a rare huge request should not
// pin its buffers for the life of the process.
const maxPooledBytes = 4 << 20

func newExtenderCall() *extenderCall {
	return extenderCalls.Get().(*extenderCall)
}

func (c *extenderCall) release() {
	// The pooled call must not keep every name of the last call alive.
	clear(c.names)
	c.body.Reset()
	c.rawNames, c.names, c.scores, c.answer = c.rawNames[:0], c.names[:0], c.scores[:0], c.answer[:0]
	c.args, c.plainNames, c.namesText = extenderArgs{}, false, ""
	if c.body.Cap() > maxPooledBytes || cap(c.rawNames) > maxPooledBytes || cap(c.answer) > maxPooledBytes ||
		cap(c.names) > maxPooledBytes/16 {
		return
	}
	extenderCalls.Put(c)
}

// namesSent reports, after decode, whether the scheduler sent NodeNames (it is nodeCacheCapable)
// rather than full Nodes. Both absent is read as names: an empty list.
func (c *extenderCall) namesSent() bool {
	return c.args.NodeNames != nil || c.args.Nodes == nil
}

// decode fills the call's arguments and names from a request body, which must stay unchanged
// until release. The names it leaves are the table's strings.
func (c *extenderCall) decode(body []byte, table *nameTable) error {
	if !c.decodeFast(body) {
		c.args, c.names, c.namesText = extenderArgs{NodeNames: &c.rawNames}, c.names[:0], ""
		if err := json.Unmarshal(body, &c.args); err != nil {
			return err
		}
		if err := c.decodeNames(); err != nil {
			return err
		}
	}
	table.own(c.names)
	return nil
}

// decodeFast decodes the one shape kube-scheduler sends with node names: an object of "Pod",
// "NodeNames" and "Nodes": null. It splits the names in place and hands only the pod to the
// library, whose own pass over the names (to find where they end, then to copy them) cost as much
// again as splitting them. Anything else (other keys, keys in other cases, which the library
// matches too, repeated keys, escapes, any error) is left to the library, so both always agree
// and every error message is the library's.
func (c *extenderCall) decodeFast(body []byte) bool {
	s := unsafe.String(unsafe.SliceData(body), len(body))
	var pod string
	var sawNames, sawNodes bool
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	for {
		if i >= len(s) || s[i] != '"' {
			return false
		}
		length := strings.IndexByte(s[i+1:], '"')
		if length < 0 {
			return false
		}
		key := s[i+1 : i+1+length]
		i = skipSpace(s, i+length+2)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		i = skipSpace(s, i+1)
		switch {
		case key == "Pod" && pod == "":
			end, ok := skipObject(s, i)
			if !ok {
				return false
			}
			pod, i = s[i:end], end
		case key == "Nodes" && !sawNodes && strings.HasPrefix(s[i:], "null"):
			sawNodes, i = true, i+len("null")
		case key == "NodeNames" && !sawNames:
			names, plain, end, err := splitStringArray(s, i, c.names[:0])
			if err != nil {
				return false
			}
			sawNames, c.names, c.plainNames, c.namesText = true, names, plain, s[i:end]
			i = end
		default:
			return false
		}
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
			continue
		}
		if i >= len(s) || s[i] != '}' || skipSpace(s, i+1) != len(s) || pod == "" || !sawNames {
			return false
		}
		break
	}
	c.args = extenderArgs{NodeNames: &c.rawNames} // not nil: the scheduler sent names
	if err := json.Unmarshal(unsafe.Slice(unsafe.StringData(pod), len(pod)), &c.args.Pod); err != nil {
		c.args = extenderArgs{}
		return false
	}
	return true
}

// skipObject returns the end of the JSON object starting at s[i], matching braces outside
// strings. It checks no more than it needs to find the end: the library decodes what it spans.
func skipObject(s string, i int) (end int, ok bool) {
	if i >= len(s) || s[i] != '{' {
		return 0, false
	}
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}

// namesAsSent returns the offered names' JSON array as the scheduler sent it when that is
// exactly what the encoder would write for them, "" otherwise: every name is plain and the array
// has no whitespace. Most filter answers on a cluster with room pass every node, and copying the
// array whole is the cheapest answer there is.
func (c *extenderCall) namesAsSent() string {
	if c.namesText == "" || !c.plainNames {
		return ""
	}
	compact := 2 + max(len(c.names)-1, 0) // brackets and commas
	for _, name := range c.names {
		compact += len(name) + 2
	}
	if len(c.namesText) != compact {
		return ""
	}
	return c.namesText
}

// decodeNames fills names from what the library decoded.
func (c *extenderCall) decodeNames() error {
	if c.args.NodeNames == nil || len(c.rawNames) == 0 {
		// NodeNames was null or absent.
		c.args.NodeNames = nil
		if c.args.Nodes != nil {
			for i := range c.args.Nodes.Items {
				c.names = append(c.names, c.args.Nodes.Items[i].Name)
			}
		}
		c.plainNames = allPlain(c.names)
		return nil
	}
	names, plain, err := splitNodeNames(c.rawNames, c.names)
	if err != nil {
		return fmt.Errorf("NodeNames: %w", err)
	}
	c.names, c.plainNames = names, plain
	return nil
}

var errNeedsFullDecoder = errors.New("string needs the full decoder")

// splitNodeNames parses a JSON array of strings into substrings of raw, appended to dst: they are
// good only while raw is unchanged. A name with an escape sequence or invalid UTF-8 (never a
// valid node name, but JSON the ordinary decoder accepts and rewrites) sends the whole array
// through the ordinary decoder instead, so both always agree. plain reports whether every name
// encodes as itself between quotes.
func splitNodeNames(raw []byte, dst []string) (names []string, plain bool, err error) {
	s := unsafe.String(unsafe.SliceData(raw), len(raw))
	names, plain, end, err := splitStringArray(s, skipSpace(s, 0), dst)
	switch {
	case errors.Is(err, errNeedsFullDecoder):
		var decoded []string
		if err := json.Unmarshal(raw, &decoded); err != nil {
			return dst, false, err
		}
		return append(dst, decoded...), allPlain(decoded), nil
	case err == nil && skipSpace(s, end) != len(s):
		return dst, false, fmt.Errorf("unexpected data after the array at byte %d", end)
	}
	return names, plain, err
}

// Byte classes inside a JSON string, for splitStringArray's one pass over each name.
const (
	classEscape  = 1 << iota // a backslash: the ordinary decoder must unescape
	classControl             // below 0x20: not allowed unescaped in a JSON string
	classHigh                // part of a multi-byte UTF-8 sequence, maybe an invalid one
	classHTML                // '<', '>' or '&', which the encoder escapes
)

var stringByteClass = func() (table [256]uint8) {
	for c := range 0x20 {
		table[c] = classControl
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		table[c] = classHigh
	}
	table['\\'] = classEscape
	table['<'], table['>'], table['&'] = classHTML, classHTML, classHTML
	return table
}()

// splitStringArray parses the array `["a", "b"]` starting at s[i] into substrings of s appended
// to dst, refusing anything else, and returns where the array ends.
func splitStringArray(s string, i int, dst []string) (names []string, plain bool, end int, err error) {
	if i >= len(s) || s[i] != '[' {
		return dst, false, 0, fmt.Errorf("want a JSON array of strings")
	}
	names, plain = dst, true
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return names, plain, i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return dst, false, 0, fmt.Errorf("want a string at byte %d", i)
		}
		length := strings.IndexByte(s[i+1:], '"')
		if length < 0 {
			return dst, false, 0, fmt.Errorf("unterminated string at byte %d", i)
		}
		name := s[i+1 : i+1+length]
		var class uint8
		for j := 0; j < len(name); j++ {
			class |= stringByteClass[name[j]]
		}
		switch {
		case class&classEscape != 0:
			// The quote found may itself be escaped; the ordinary decoder sorts it out.
			return dst, false, 0, errNeedsFullDecoder
		case class&classControl != 0:
			at := strings.IndexFunc(name, func(r rune) bool { return r < 0x20 })
			return dst, false, 0, fmt.Errorf("control character in string at byte %d", i+1+at)
		case class&classHigh != 0 && !utf8.ValidString(name):
			return dst, false, 0, errNeedsFullDecoder
		}
		plain = plain && class == 0
		names = append(names, name)
		i = skipSpace(s, i+length+2)
		if i < len(s) && s[i] == ']' {
			return names, plain, i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return dst, false, 0, fmt.Errorf("want ',' or ']' at byte %d", i)
		}
		i = skipSpace(s, i+1)
	}
}

// skipSpace skips JSON whitespace (not every Unicode space: a form feed is not JSON whitespace).
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
