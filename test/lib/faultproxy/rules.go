package faultproxy

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Matcher selects the requests a rule applies to.
type Matcher func(*http.Request) bool

// Rule injects Fault into the requests Match accepts. Build it with a composite literal, pass its
// address to Proxy.Add, and keep that pointer to read its hits; a Rule must not be copied.
type Rule struct {
	Match Matcher
	// Times is how many matching requests the rule takes; the ones after it pass through (or on to
	// later rules). 0 means every matching request until the rule is removed.
	Times int
	// Fault is what happens to a request the rule takes. A rule with a nil Fault observes: it
	// counts matching requests as they arrive, and they go on to the fault rules.
	Fault Fault

	mu    sync.Mutex
	added bool
	left  int // requests the rule may still take when Times > 0
	hits  int
	// changed is closed, and replaced, whenever hits grows.
	changed chan struct{}
}

// Add installs the rule after those already installed and returns the function that removes it
// again (safe to call more than once). Removing a rule does not release requests it holds (see
// Hold). Add panics if the rule has no matcher or was added before.
func (p *Proxy) Add(rule *Rule) (remove func()) {
	if rule.Match == nil {
		panic("faultproxy: Rule without Match")
	}
	rule.mu.Lock()
	if rule.added {
		rule.mu.Unlock()
		panic("faultproxy: Rule added twice")
	}
	rule.added, rule.left = true, rule.Times
	rule.mu.Unlock()

	p.mu.Lock()
	p.rules = append(p.rules, rule)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.rules = slices.DeleteFunc(p.rules, func(r *Rule) bool { return r == rule })
	}
}

// take reserves one of the rule's requests, if it has any left.
func (r *Rule) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Times == 0 {
		return true
	}
	if r.left == 0 {
		return false
	}
	r.left--
	return true
}

// giveBack returns a request taken by a fault that could not be applied, so the next matching
// request gets it instead.
func (r *Rule) giveBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Times > 0 {
		r.left++
	}
}

// hit records that the fault took effect on one more request.
func (r *Rule) hit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits++
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Hits is how many requests the fault has taken effect on; each Fault says when that is.
func (r *Rule) Hits() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits
}

// WaitHits returns once Hits reaches n, or with an error when ctx ends first.
func (r *Rule) WaitHits(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		hits := r.hits
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if hits >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faultproxy: rule hit %d of %d times: %w", hits, n, context.Cause(ctx))
		}
	}
}

// Any matches every request.
func Any() Matcher {
	return func(*http.Request) bool { return true }
}

// Binding matches every POST of a pods/binding subresource, the call that binds a pod.
func Binding() Matcher {
	return BindingOf("", "")
}

// BindingOf matches POSTs of pods/binding in namespace ns for pods whose name starts with
// podPrefix; an empty ns or podPrefix matches any.
func BindingOf(ns, podPrefix string) Matcher {
	return func(r *http.Request) bool {
		pod, ok := parsePodPath(r.URL.Path)
		return ok && r.Method == http.MethodPost && pod.subresource == "binding" &&
			(ns == "" || pod.namespace == ns) && strings.HasPrefix(pod.name, podPrefix)
	}
}

// PodGet matches GETs of the single pod ns/name (not lists or watches).
func PodGet(ns, name string) Matcher {
	return func(r *http.Request) bool {
		pod, ok := parsePodPath(r.URL.Path)
		return ok && r.Method == http.MethodGet && pod.subresource == "" && pod.namespace == ns && pod.name == name
	}
}

// podPath is /api/v1/namespaces/<namespace>/pods/<name>[/<subresource>].
type podPath struct {
	namespace, name, subresource string
}

func parsePodPath(path string) (podPath, bool) {
	rest, ok := strings.CutPrefix(path, "/api/v1/namespaces/")
	if !ok {
		return podPath{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || len(parts) > 4 || parts[1] != "pods" || parts[0] == "" || parts[2] == "" {
		return podPath{}, false
	}
	p := podPath{namespace: parts[0], name: parts[2]}
	if len(parts) == 4 {
		p.subresource = parts[3]
	}
	return p, true
}
