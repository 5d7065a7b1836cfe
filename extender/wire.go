package extender

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	json "github.com/goccy/go-json"
	corev1 "k8s.io/api/core/v1"
)

// What crosses the wire between kube-scheduler and lockstep, done by hand where the general
// decoder and encoder cost too much at thousands of nodes: the request's node names split in
// place, one long-lived string per node name (the name table), and the answers written byte for
// byte. Everything else in this package goes through ordinary types.

// --- requests ---------------------------------------------------------------------------------

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

// --- the name table -------------------------------------------------------------------------

// maxKnownNames bounds the table: a cluster has at most a few thousand nodes, so a table this
// full has mostly names of nodes long gone, and starting over drops them.
const maxKnownNames = 1 << 16

// nameTable keeps one long-lived string per node name. A call's names are first split in place
// out of the request's storage, which the next call reuses; swapping each for the table's string
// lets the manager keep any name it is handed. Copying every call's names instead (tens of
// kilobytes at 5,000 nodes) made garbage whose collections slowed every call.
//
// The scheduler sends its nodes in much the same order call after call, so the table keeps them
// in the order it first saw them and checks the entry after the last match before it looks a
// name up: one short comparison per name instead of a hash lookup, which at 5,000 names was a
// tenth of a filter call.
type nameTable struct {
	mu    sync.RWMutex
	order []string
	index map[string]int // position in order
}

// own replaces every name with the table's string for it, adding the names it has not seen.
func (t *nameTable) own(names []string) {
	t.mu.RLock()
	missing := false
	next := 0
	for k, name := range names {
		if next < len(t.order) && t.order[next] == name {
			names[k] = t.order[next]
			next++
		} else if at, ok := t.index[name]; ok {
			names[k] = t.order[at]
			next = at + 1
		} else {
			missing = true
		}
	}
	t.mu.RUnlock()
	if missing {
		t.add(names)
	}
}

func (t *nameTable) add(names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.index == nil || len(t.order)+len(names) > maxKnownNames {
		// Strings already handed out stay valid: the table only stops knowing them.
		t.order, t.index = make([]string, 0, len(names)), make(map[string]int, len(names))
	}
	block := t.newNames(names)
	for k, name := range names {
		at, ok := t.index[name]
		if !ok {
			at = len(t.order)
			t.order = append(t.order, block[:len(name)])
			block = block[len(name):]
			t.index[t.order[at]] = at
		}
		names[k] = t.order[at]
	}
}

// newNames copies the names the table does not know, each once, into one string, in order. Side
// by side in memory, in the order the scheduler sends them, they are read at the speed of a
// sequential scan: scattered, each name the manager looks up was a cache miss of its own, and at
// 5,000 nodes that made a filter call a third slower.
func (t *nameTable) newNames(names []string) string {
	var block strings.Builder
	seen := make(map[string]bool)
	for _, name := range names {
		if _, ok := t.index[name]; !ok && !seen[name] {
			seen[name] = true
			block.WriteString(name)
		}
	}
	return block.String()
}

// --- answers ----------------------------------------------------------------------------------

// The answers below are written by hand, byte for byte what the encoder writes for the
// extenderv1 types (the fuzz tests hold them to it): building the upstream structures first and
// encoding them was most of a call's garbage at thousands of nodes.

// aboveLowest keeps the nodes that score above the lowest score, each lowered by it, compacting
// names and scores in place. kube-scheduler adds an extender's score to a node's total and gives a
// node missing from the answer nothing, so lowering every node by the same amount changes no
// choice. It pays per entry, though: it decodes each one and keeps a map entry and a score record
// per node, every pod, at thousands of nodes. On a cluster of like nodes most score alike, and the
// answer shrinks to the few nodes lockstep prefers.
func aboveLowest(names []string, scores []int64) ([]string, []int64) {
	if len(scores) == 0 {
		return names, scores
	}
	low := slices.Min(scores)
	kept := 0
	for i, score := range scores {
		if score > low {
			names[kept], scores[kept] = names[i], score-low
			kept++
		}
	}
	return names[:kept], scores[:kept]
}

// appendHostPriorities writes an extenderv1.HostPriorityList of names and scores. plain says
// every name is known to need no escaping.
func appendHostPriorities(dst []byte, names []string, scores []int64, plain bool) []byte {
	dst = append(dst, '[')
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		namePlain := plain || plainJSONString(name)
		if score := scores[i]; namePlain && score >= 0 && score < int64(len(plainEntryEndings)) {
			// The usual entry: three copies.
			dst = append(dst, `{"Host":"`...)
			dst = append(dst, name...)
			dst = append(dst, plainEntryEndings[score]...)
			continue
		}
		dst = append(dst, `{"Host":`...)
		dst = appendString(dst, name, namePlain)
		dst = append(dst, `,"Score":`...)
		dst = strconv.AppendInt(dst, scores[i], 10)
		dst = append(dst, '}')
	}
	return append(dst, "]\n"...)
}

// plainEntryEndings end an entry whose name is plain, after the name, for the scores extenders
// give (0..10).
var plainEntryEndings = func() (endings [11]string) {
	for score := range endings {
		endings[score] = `","Score":` + strconv.Itoa(score) + "}"
	}
	return endings
}()

// appendFilterResult writes the extenderv1.ExtenderFilterResult of a nodeCacheCapable call:
// the feasible names and, when there are any, the nodes that failed and why, those preemption
// might cure (resolvable) apart from the others. plain says every feasible name is known to need
// no escaping; encoded, when not empty, is feasible already encoded as a JSON array.
func appendFilterResult(dst []byte, feasible []string, plain bool, encoded string, resolvable, unresolvable map[string]string) []byte {
	dst = append(dst, `{"Nodes":null,"NodeNames":`...)
	if encoded != "" {
		dst = append(dst, encoded...)
	} else {
		dst = append(dst, '[')
		for i, name := range feasible {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, name, plain)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"FailedNodes":`...)
	dst = appendFailures(dst, resolvable)
	dst = append(dst, `,"FailedAndUnresolvableNodes":`...)
	dst = appendFailures(dst, unresolvable)
	return append(dst, `,"Error":""}`+"\n"...)
}

// appendFailures writes a map of failed nodes and their reasons, null when nil.
func appendFailures(dst []byte, failed map[string]string) []byte {
	if failed == nil {
		return append(dst, "null"...)
	}
	// The library sorts keys and escapes as the encoder does. Failures come with gang members
	// waiting or placed and with full clusters, not with the calls that make up most of the load.
	failures, _ := json.Marshal(failed)
	return append(dst, failures...)
}

func appendString(dst []byte, s string, plain bool) []byte {
	if plain || plainJSONString(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	quoted, _ := json.Marshal(s)
	return append(dst, quoted...)
}

// plainJSONString reports whether s encodes as itself between quotes: printable ASCII other than
// the characters the encoder escapes.
func plainJSONString(s string) bool {
	var class uint8
	for i := 0; i < len(s); i++ {
		class |= stringByteClass[s[i]]
	}
	return class == 0 && !strings.Contains(s, `"`)
}

func allPlain(names []string) bool {
	for _, name := range names {
		if !plainJSONString(name) {
			return false
		}
	}
	return true
}
