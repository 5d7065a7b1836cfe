package dialect

import (
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Read against kai-scheduler/KAI-Scheduler v0.17 (d5bc503a): pkg/apis/scheduling/v2alpha2
// (podgroup_types.go, podgroup_webhook.go), pkg/scheduler/api/podgroup_info (job_info.go,
// subgroup_info/factory.go, subgroup_info/subgroupset.go), pkg/scheduler/plugins/topology and
// pkg/common/podgroup.

// KindKAIQueue is KAI's Queue (scheduling.run.ai/v2, cluster-scoped), as quota.Ref names it.
const KindKAIQueue = "KAI Queue"

// KAI is KAI Scheduler's PodGroup, named by a pod's annotation pod-group-name. KAI's own scheduler
// writes only status.schedulingConditions (StatusKAI); its podgroup controller writes the
// resource counts, which lockstep leaves to it.
var KAI = API{Dialect: "KAI Scheduler", Resource: podGroups("scheduling.run.ai", "v2alpha2"),
	Status: StatusKAI, key: KAIKey, quorum: kaiMinMember, quorumField: "spec.minMember", extra: kaiGroup}

// KAIKey names a KAI PodGroup the way its pods do.
func KAIKey(namespace, name string) string {
	return "KAI Scheduler PodGroup " + namespace + "/" + name
}

// kaiScheduler reads a pod KAI's podgrouper (or its author) put in a PodGroup; its subgroup label
// is its task, for the subgroups' minimums.
func kaiScheduler(p podMarkers) (claim, bool) {
	name, ok := p.annotations[wellknown.AnnotationKAIPodGroup]
	if !ok {
		return claim{}, false
	}
	task := p.labels[wellknown.LabelKAISubGroup]
	return groupClaim(p, annotationMarker(wellknown.AnnotationKAIPodGroup, name), name, task, KAIKey), true
}

// kaiPodQueue is the KAI Queue a pod's label names; KAI's podgrouper copies it into the PodGroup's
// spec.queue, which comes first.
func kaiPodQueue(p podMarkers) (quota.Ref, bool) {
	for _, key := range []string{wellknown.LabelKAIQueue, wellknown.LabelKAIQueueLegacy} {
		if name := p.labels[key]; name != "" {
			return quota.Ref{Kind: KindKAIQueue, Name: name}, true
		}
	}
	return quota.Ref{}, false
}

// kaiMinMember is the quorum of a PodGroup without subgroups: spec.minMember, 1 when absent (the
// default pod set KAI makes), and 0 asks for none, as KAI's elastic jobs do. With subgroups KAI
// goes by theirs (kaiSubGroups replaces this); its podgrouper writes minMember beside them.
func kaiMinMember(r fields) (int, error) {
	n, err := r.count("spec", "minMember")
	if err != nil {
		return 0, err
	}
	minSubGroup, err := r.count("spec", "minSubGroup")
	if err != nil {
		return 0, err
	}
	if n != nil && minSubGroup != nil {
		return 0, r.bad("spec.minSubGroup", fmt.Sprint(*minSubGroup), "minMember and minSubGroup are mutually exclusive, as KAI's webhook says: keep one")
	}
	if n == nil {
		return 1, nil
	}
	return max(int(*n), 1), nil
}

// count reads a field of KAI's that counts something: nil when absent, refused when negative or
// beyond the int32 KAI declares it.
func (r fields) count(path ...string) (*int64, error) {
	n, ok, err := r.int(path...)
	if err != nil || !ok {
		return nil, err
	}
	return &n, r.checkCount(strings.Join(path, "."), n)
}

// countIn is count for a field of an object inside the one r reads (a subgroup).
func (r fields) countIn(obj map[string]any, field, key string) (*int64, error) {
	n, ok, err := r.intIn(obj, field, key)
	if err != nil || !ok {
		return nil, err
	}
	return &n, r.checkCount(field, n)
}

func (r fields) checkCount(field string, n int64) error {
	switch {
	case n < 0:
		return r.bad(field, fmt.Sprint(n), "must not be negative (0 asks for no quorum)")
	case n > math.MaxInt32:
		return r.bad(field, fmt.Sprint(n), "must fit a 32-bit integer, as KAI's field does")
	}
	return nil
}

// kaiGroup reads what a KAI PodGroup says beyond spec.minMember:
//   - spec.queue, a KAI Queue by name; empty leaves the members' own queue label to decide;
//   - spec.preemptibility, checked only: it says whether others may evict the gang, which no
//     lockstep rule expresses (docs/dialects.md);
//   - spec.topologyConstraint (kaiTopology);
//   - spec.subGroups and spec.minSubGroup (kaiSubGroups).
//
// spec.priorityClassName is not read: lockstep goes by the members' own priority, as for every
// PodGroup that names a class rather than a number.
func kaiGroup(_ *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	if err := kaiQueue(r, spec); err != nil {
		return err
	}
	if err := kaiPreemptibility(r); err != nil {
		return err
	}
	top, _, err := kaiTopology(r, "spec.topologyConstraint", "spec", "topologyConstraint")
	if err != nil {
		return err
	}
	spec.Topology = top
	return kaiSubGroups(r, spec)
}

func kaiQueue(r fields, spec *gangspec.Spec) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "queue")
	name, isString := raw.(string)
	if found && raw != nil && !isString {
		return r.bad("spec.queue", fmt.Sprint(raw), "must be the name of a "+KindKAIQueue)
	}
	if name != "" {
		spec.Queue = quota.Ref{Kind: KindKAIQueue, Name: name}
	}
	return nil
}

// kaiPreemptibility refuses what KAI's CRD would. The field says whether other jobs may evict this
// one once it runs (empty: by its priority, preemptible below 100); lockstep has no rule that
// keeps a gang from being evicted, so the value is checked and not kept.
func kaiPreemptibility(r fields) error {
	v, _, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "preemptibility")
	switch v {
	case nil, "", "preemptible", "non-preemptible":
		return nil
	}
	return r.bad("spec.preemptibility", fmt.Sprint(v), "must be preemptible or non-preemptible")
}

// kaiTopology reads a topologyConstraint. KAI applies one only when it names its Topology object;
// the levels are node label keys of that object's levels (or aliases of them), which lockstep
// takes as tier keys without reading the Topology: --topology-tiers names each tier by its label
// key, and may give it the alias as its name. Required wins over preferred: lockstep holds a gang
// to one domain of one tier, and KAI's preference is a narrower level inside the required one.
// It returns the Topology object's name beside what it asks.
func kaiTopology(r fields, field string, path ...string) (gangspec.Topology, string, error) {
	tc, err := r.mapField("must be an object with topology and requiredTopologyLevel or preferredTopologyLevel", path...)
	if tc == nil || err != nil {
		return gangspec.Topology{}, "", err
	}
	words := map[string]string{}
	for _, key := range []string{"topology", "requiredTopologyLevel", "preferredTopologyLevel"} {
		raw, given := tc[key]
		word, isString := raw.(string)
		if given && raw != nil && !isString {
			return gangspec.Topology{}, "", r.bad(field+"."+key, fmt.Sprint(raw), "must be a string")
		}
		words[key] = word
	}
	object, required, preferred := words["topology"], words["requiredTopologyLevel"], words["preferredTopologyLevel"]
	switch {
	case object == "":
		return gangspec.Topology{}, "", nil // KAI applies no constraint that names no Topology
	case required == "" && preferred == "":
		return gangspec.Topology{}, "", r.bad(field, fmt.Sprint(tc), "names a topology but no level: needs requiredTopologyLevel or preferredTopologyLevel")
	}
	t := gangspec.Topology{Key: required, Required: true, Source: field + " of " + r.object}
	if required == "" {
		t.Key, t.Required = preferred, false
	}
	return t, object, nil
}

// kaiPart is one entry of spec.subGroups.
type kaiPart struct {
	index       int
	name        string
	parent      string // "" is the PodGroup itself, as KAI takes an absent or empty parent
	minMember   *int64
	minSubGroup *int64
	// topology is what the subgroup's own constraint asks, in the Topology object topologyOf.
	topology   gangspec.Topology
	topologyOf string
}

func (p kaiPart) field(name string) string {
	return fmt.Sprintf("spec.subGroups[%d].%s", p.index, name)
}

// kaiSubGroups reads spec.subGroups. KAI requires every member of a set: each subgroup without
// children (a pod set) its minMember pods, each subgroup with children and the PodGroup itself
// minSubGroup of their direct children, all of them when it is absent. lockstep's gang has one
// level of task quorums, so the tree flattens to the pod sets it requires, each a task quorum by
// its name, and the quorum is their sum. A set that asks for some but not all of its children (k
// of n) cannot be flattened and is refused; one that asks for none (minSubGroup 0) is elastic, as
// KAI says, and its pod sets ask nothing.
func kaiSubGroups(r fields, spec *gangspec.Spec) error {
	rootMin, err := r.count("spec", "minSubGroup")
	if err != nil {
		return err
	}
	parts, err := kaiParts(r)
	switch {
	case err != nil:
		return err
	case parts == nil && rootMin != nil:
		return r.bad("spec.minSubGroup", fmt.Sprint(*rootMin), "counts subgroups, and spec.subGroups lists none")
	case parts == nil:
		return nil
	}
	if err := kaiTree(r, parts); err != nil {
		return err
	}
	if err := kaiPartTopologies(r, parts, spec.Topology); err != nil {
		return err
	}
	quorums := map[string]int{}
	if err := kaiRequire(r, parts, "", rootMin, "spec.minSubGroup", true, quorums); err != nil {
		return err
	}
	spec.MinAvailable, spec.MinPerTask = 1, nil
	if total := quorumTotal(quorums); total > 0 {
		spec.MinAvailable, spec.MinPerTask = total, quorums
		spec.QuorumFrom = "the minMember of spec.subGroups of " + r.object
	}
	return nil
}

// quorumTotal is the quorum task quorums make: all of them, placed together.
func quorumTotal(m map[string]int) int {
	total := 0
	for _, n := range m {
		total += n
	}
	return total
}

// kaiParts reads each subgroup's own fields; nil when there are none.
func kaiParts(r fields) ([]kaiPart, error) {
	list, err := r.list("spec", "subGroups")
	if err != nil || len(list) == 0 {
		return nil, err
	}
	parts := make([]kaiPart, len(list))
	seen := map[string]int{}
	for i, m := range list {
		p, err := kaiReadPart(r, i, m)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[p.name]; dup {
			return nil, r.bad(p.field("name"), p.name, fmt.Sprintf("spec.subGroups[%d] has this name already; subgroup names must be unique", j))
		}
		seen[p.name] = i
		parts[i] = p
	}
	return parts, nil
}

func kaiReadPart(r fields, i int, m map[string]any) (kaiPart, error) {
	p := kaiPart{index: i}
	name, _ := m["name"].(string)
	if name == "" {
		return p, r.bad(p.field("name"), shown(m["name"]), "must name the subgroup: its pods' label "+wellknown.LabelKAISubGroup+" says it")
	}
	p.name = name
	switch parent := m["parent"].(type) {
	case nil:
	case string:
		p.parent = parent
	default:
		return p, r.bad(p.field("parent"), fmt.Sprint(parent), "must name another subgroup")
	}
	var err error
	if p.minMember, err = r.countIn(m, p.field("minMember"), "minMember"); err != nil {
		return p, err
	}
	if p.minSubGroup, err = r.countIn(m, p.field("minSubGroup"), "minSubGroup"); err != nil {
		return p, err
	}
	if p.minMember != nil && p.minSubGroup != nil {
		return p, r.bad(p.field("minSubGroup"), fmt.Sprint(*p.minSubGroup), "minMember and minSubGroup are mutually exclusive, as KAI's webhook says: keep one")
	}
	p.topology, p.topologyOf, err = kaiTopology(fields{object: r.object, obj: m}, p.field("topologyConstraint"), "topologyConstraint")
	return p, err
}

// kaiTree refuses parents that name no subgroup and parents that go round in a cycle, as KAI's
// webhook does: either would leave KAI without a tree to schedule by.
func kaiTree(r fields, parts []kaiPart) error {
	byName := kaiByName(parts)
	for _, p := range parts {
		if p.parent != "" && byName[p.parent] == nil {
			return r.bad(p.field("parent"), p.parent, "names no subgroup of this PodGroup")
		}
	}
	for _, p := range parts {
		path := []string{p.name}
		for at := byName[p.parent]; at != nil; at = byName[at.parent] {
			path = append(path, at.name)
			if at.name == p.name {
				return r.bad(p.field("parent"), p.parent, "makes a cycle of parents: "+strings.Join(path, " -> "))
			}
			if len(path) > len(parts) {
				break // a cycle above p, which that subgroup's own walk reports
			}
		}
	}
	return nil
}

func kaiByName(parts []kaiPart) map[string]*kaiPart {
	byName := make(map[string]*kaiPart, len(parts))
	for i := range parts {
		byName[parts[i].name] = &parts[i]
	}
	return byName
}

func kaiChildren(parts []kaiPart, parent string) []*kaiPart {
	var out []*kaiPart
	for i := range parts {
		if parts[i].parent == parent {
			out = append(out, &parts[i])
		}
	}
	return out
}

// kaiRequire adds the pod sets the set named parent requires to quorums, when want; minSubGroup
// (nil for all) is what the set asks of its direct children, field where it was written. Sets
// inside an elastic one are checked all the same, so that a rule is refused wherever it is written.
func kaiRequire(r fields, parts []kaiPart, parent string, minSubGroup *int64, field string, want bool, quorums map[string]int) error {
	children := kaiChildren(parts, parent)
	if minSubGroup != nil {
		switch n := int(*minSubGroup); {
		case n == 0:
			want = false
		case n > len(children):
			return r.bad(field, fmt.Sprint(n), fmt.Sprintf("exceeds the %d direct subgroups it counts: the group could never be placed", len(children)))
		case n < len(children):
			return r.bad(field, fmt.Sprint(n), fmt.Sprintf("asks for %d of its %d direct subgroups, any of them; lockstep holds each subgroup to its own minimum and cannot place some of them in place of others: ask for all (leave minSubGroup out) or none (0)", n, len(children)))
		}
	}
	for _, c := range children {
		if kaiChildren(parts, c.name) != nil {
			// KAI ignores a minMember of a subgroup with children (its webhook refuses one on create).
			if err := kaiRequire(r, parts, c.name, c.minSubGroup, c.field("minSubGroup"), want, quorums); err != nil {
				return err
			}
			continue
		}
		switch {
		case c.minSubGroup != nil:
			return r.bad(c.field("minSubGroup"), fmt.Sprint(*c.minSubGroup), "counts child subgroups, and this subgroup has none: give it minMember")
		case c.minMember == nil:
			return r.bad(c.field("minMember"), "", "missing: a subgroup without child subgroups must say how many of its pods must be placed together, as KAI's webhook requires")
		case want && *c.minMember > 0:
			quorums[c.name] = int(*c.minMember)
		}
	}
	return nil
}

// shown is a decoded value as a refusal quotes it; "" for none.
func shown(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// kaiPartTopologies refuses a subgroup's own required topology unless the gang's holds it already
// (the same level of the same Topology object, where an alias means the same): lockstep holds a
// whole gang to one domain, not each subgroup to a domain of its own. A subgroup's preference is
// not read; the gang's one preference is its own.
func kaiPartTopologies(r fields, parts []kaiPart, gang gangspec.Topology) error {
	gangOf, _, _ := unstructured.NestedString(r.obj, "spec", "topologyConstraint", "topology")
	for _, p := range parts {
		if !p.topology.Required || (gang.Required && gang.Key == p.topology.Key && gangOf == p.topologyOf) {
			continue
		}
		return r.bad(p.field("topologyConstraint.requiredTopologyLevel"), p.topology.Key,
			"lockstep holds the whole gang to one domain, not each subgroup to its own: require this level in spec.topologyConstraint instead, or drop it here")
	}
	return nil
}
