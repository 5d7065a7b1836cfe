package extender

import (
	"slices"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"
)

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
