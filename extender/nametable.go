package extender

import (
	"strings"
	"sync"
)

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
