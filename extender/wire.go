package extender

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	corev1 "k8s.io/api/core/v1"
)

// extenderArgs is extenderv1.ExtenderArgs as it arrives on the wire (the same keys: the upstream
// type has no json tags), with NodeNames decoded by nodeNameList. The scheduler sends every
// candidate node's name on every filter and prioritize call; decoded one string each, 5,000 names
// are 5,000 allocations per call, and the garbage collection they cause is what stretched the
// slowest calls.
type extenderArgs struct {
	Pod       *corev1.Pod
	Nodes     *corev1.NodeList
	NodeNames *nodeNameList
}

// nodeNames are the candidate nodes, from NodeNames (nodeCacheCapable) or the full Nodes.
func (a *extenderArgs) nodeNames() []string {
	if a.NodeNames != nil {
		return *a.NodeNames
	}
	if a.Nodes == nil {
		return nil
	}
	names := make([]string, len(a.Nodes.Items))
	for i := range a.Nodes.Items {
		names[i] = a.Nodes.Items[i].Name
	}
	return names
}

// nodeNameList decodes a JSON array of strings into substrings of one string: two allocations
// whatever the number of names. A name with an escape sequence or invalid UTF-8 (never a valid
// node name, but JSON the ordinary decoder accepts and rewrites) sends the whole array through the
// ordinary decoder instead, so both always agree.
type nodeNameList []string

var errNeedsFullDecoder = errors.New("string needs the full decoder")

func (l *nodeNameList) UnmarshalJSON(data []byte) error {
	all := string(data) // the one copy every name will share
	if start := skipSpace(all, 0); strings.HasPrefix(all[start:], "null") && skipSpace(all, start+4) == len(all) {
		*l = nil
		return nil
	}
	names, err := splitStringArray(all)
	if errors.Is(err, errNeedsFullDecoder) {
		var plain []string
		if err := json.Unmarshal(data, &plain); err != nil {
			return err
		}
		*l = plain
		return nil
	}
	if err != nil {
		return fmt.Errorf("NodeNames: %w", err)
	}
	*l = names
	return nil
}

// splitStringArray parses `["a", "b"]` into substrings of s, refusing anything else.
func splitStringArray(s string) ([]string, error) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return nil, fmt.Errorf("want a JSON array of strings")
	}
	names := make([]string, 0, strings.Count(s, ",")+1)
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return names, endOfArray(s, i)
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return nil, fmt.Errorf("want a string at byte %d", i)
		}
		end, ascii := i+1, true
		for end < len(s) && s[end] != '"' {
			switch {
			case s[end] == '\\':
				return nil, errNeedsFullDecoder
			case s[end] < 0x20:
				return nil, fmt.Errorf("control character in string at byte %d", end)
			case s[end] >= utf8.RuneSelf:
				ascii = false
			}
			end++
		}
		if end >= len(s) {
			return nil, fmt.Errorf("unterminated string at byte %d", i)
		}
		if !ascii && !utf8.ValidString(s[i+1:end]) {
			return nil, errNeedsFullDecoder
		}
		names = append(names, s[i+1:end])
		i = skipSpace(s, end+1)
		if i < len(s) && s[i] == ']' {
			return names, endOfArray(s, i)
		}
		if i >= len(s) || s[i] != ',' {
			return nil, fmt.Errorf("want ',' or ']' at byte %d", i)
		}
		i = skipSpace(s, i+1)
	}
}

func endOfArray(s string, i int) error {
	if skipSpace(s, i+1) != len(s) {
		return fmt.Errorf("unexpected data after the array at byte %d", i+1)
	}
	return nil
}

// skipSpace skips JSON whitespace (not every Unicode space: a form feed is not JSON whitespace).
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// appendHostPriorities writes the JSON of an extenderv1.HostPriorityList straight from names and
// scores, byte for byte what the encoder would write: building the list first and encoding it
// was most of prioritize's garbage at thousands of nodes. A name that needs escaping is encoded
// by the library.
func appendHostPriorities(buf *bytes.Buffer, names []string, scores []int64) {
	buf.WriteByte('[')
	var num [20]byte
	for i, name := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"Host":`)
		if plainJSONString(name) {
			buf.WriteByte('"')
			buf.WriteString(name)
			buf.WriteByte('"')
		} else {
			quoted, _ := json.Marshal(name)
			buf.Write(quoted)
		}
		buf.WriteString(`,"Score":`)
		buf.Write(strconv.AppendInt(num[:0], scores[i], 10))
		buf.WriteByte('}')
	}
	buf.WriteString("]\n")
}

// plainJSONString reports whether s encodes as itself between quotes: printable ASCII other than
// the characters the encoder escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
