package quota

import (
	"fmt"
	"slices"
	"strings"
)

// tree is how the defined queues nest: Volcano's spec.parent, Koordinator's parent label, KAI's
// parentQueue, YuniKorn's nested queues. It is built whole whenever a queue is defined or
// forgotten (queues change seldom, questions often) and never changed after, so that clones of
// a book share it.
//
// A queue whose chain of parents is broken (a cycle, a parent no object defines, or such a queue
// above it) is left out of the tree: it stands at the top for shares, so that what it already
// holds is still counted, and it admits nothing until fixed (broken says why).
type tree struct {
	// parent is each nested queue's parent key; a queue at the top has none.
	parent map[string]string
	// children are each parent's children, sorted.
	children map[string][]string
	broken   map[string]error
}

// flat reports whether no queue nests: every question then reads the queues alone, as before
// trees.
func (t *tree) flat() bool { return len(t.parent) == 0 && len(t.broken) == 0 }

// buildTree reads the queues' parents. order is the keys in sorted order.
func buildTree(queues map[string]*entry, order []string) *tree {
	t := &tree{parent: map[string]string{}, children: map[string][]string{}, broken: map[string]error{}}
	for _, key := range order {
		if e := queues[key]; e.defined && e.q.Parent != "" {
			t.link(queues, key)
		}
	}
	for _, key := range order {
		if p, ok := t.parent[key]; ok {
			t.children[p] = append(t.children[p], key)
		}
	}
	return t
}

// link walks key's chain of parents up to the top, recording key's link, or why the chain is
// broken for key.
func (t *tree) link(queues map[string]*entry, key string) {
	seen := []string{key}
	at := queues[key]
	for at.q.Parent != "" {
		pk := Key(at.q.Kind, at.q.Parent)
		p := queues[pk]
		var err error
		switch {
		case p == nil || !p.defined:
			err = fmt.Errorf("%s: %s names parent %s, which does not exist", at.q.Key(), parentField(at.q), at.q.Parent)
		case pk == key: // key is on the cycle: say so of key itself
			err = fmt.Errorf("%s: %s: the queues form a cycle, %s", key, parentField(queues[key].q), cycle(queues, seen, pk))
		case slices.Contains(seen, pk):
			err = fmt.Errorf("%s: %s: the queues form a cycle, %s", at.q.Key(), parentField(at.q), cycle(queues, seen, pk))
		}
		if err != nil {
			if at.q.Key() != key && pk != key {
				err = fmt.Errorf("%s is under %s, which cannot be used: %w", key, at.q.Key(), err)
			}
			t.broken[key] = err
			return
		}
		seen = append(seen, pk)
		at = p
	}
	t.parent[key] = seen[1]
}

func parentField(q Queue) string {
	if q.ParentField != "" {
		return q.ParentField
	}
	return "parent"
}

// cycle names the queues of the cycle that starts at key, in the order their parents name them.
func cycle(queues map[string]*entry, seen []string, key string) string {
	i := slices.Index(seen, key)
	names := make([]string, 0, len(seen)-i+1)
	for _, k := range seen[i:] {
		names = append(names, queues[k].q.Name)
	}
	return strings.Join(append(names, queues[key].q.Name), " → ")
}

// ancestors are key's parent, its parent's parent, and so on to the top.
func (t *tree) ancestors(key string) []string {
	var out []string
	for p, ok := t.parent[key]; ok; p, ok = t.parent[p] {
		out = append(out, p)
	}
	return out
}

// lineage is key and its ancestors, nearest first: the queues whose limits and shares key's
// work counts toward.
func (t *tree) lineage(key string) []string {
	return append([]string{key}, t.ancestors(key)...)
}

// contains reports whether queue inner is outer or nested anywhere under it.
func (t *tree) contains(outer, inner string) bool {
	return inner == outer || slices.Contains(t.ancestors(inner), outer)
}

// subtree is key and every queue nested under it.
func (t *tree) subtree(key string) []string {
	out := []string{key}
	for i := 0; i < len(out); i++ {
		out = append(out, t.children[out[i]]...)
	}
	return out
}

// TreeProblems says, per queue key, why the queues' nesting makes a queue unusable: its chain
// of parents is broken (a cycle, or a parent that does not exist), or it groups others and so
// runs no work of its own while marked as such with no child. Watchers report these on the
// objects; the book refuses the queues' work with the same words.
func TreeProblems(queues []Queue) map[string]error {
	b := NewBook()
	for _, q := range queues {
		b.SetQueue(q)
	}
	out := map[string]error{}
	for key := range b.queues {
		if err := b.treeProblem(key); err != nil {
			out[key] = err
		}
	}
	return out
}

// treeProblem is why key's place in the tree makes it unusable, nil when it does not.
func (b *Book) treeProblem(key string) error {
	if err := b.tree.broken[key]; err != nil {
		return err
	}
	if e := b.queues[key]; e != nil && e.defined && e.q.IsParent && len(b.tree.children[key]) == 0 {
		return fmt.Errorf("%s is marked a parent queue, which runs no work itself, and no queue names it as its parent", key)
	}
	return nil
}

// notALeaf is why a gang may not be admitted into key for being a parent, "" when it is a leaf.
func (b *Book) notALeaf(key string) string {
	kids := b.tree.children[key]
	if len(kids) == 0 {
		return ""
	}
	names := make([]string, len(kids))
	for i, k := range kids {
		names[i] = b.queues[k].q.Name
	}
	return fmt.Sprintf("%s is a parent queue (of %s): only the queues at the leaves of the tree run work; name one of them", key, strings.Join(names, ", "))
}

// subtreeAllocated is what key and the queues under it hold.
func (b *Book) subtreeAllocated(key string, held map[string]Resources) Resources {
	if b.tree.flat() {
		return b.allocated(key, held)
	}
	var sum Resources
	for _, k := range b.tree.subtree(key) {
		sum = sum.Add(b.allocated(k, held))
	}
	return sum
}

// Nested reports whether queue is outer or names it, or a queue under it, as its parent: a
// change to outer may change what queue admits. It follows the objects' names, not the tree, so
// that it still holds once outer is gone or the names form a cycle.
func (b *Book) Nested(queue, outer string) bool {
	for key, steps := queue, 0; key != "" && steps <= len(b.queues); steps++ {
		if key == outer {
			return true
		}
		e := b.queues[key]
		if e == nil || e.q.Parent == "" {
			return false
		}
		key = Key(e.q.Kind, e.q.Parent)
	}
	return false
}
