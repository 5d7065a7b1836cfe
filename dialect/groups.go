package dialect

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// API is one group-object API lockstep reads: a PodGroup kind of one project, at one version.
type API struct {
	// Dialect is the project whose users write these objects, as messages name it.
	Dialect string
	// Kind is the objects' kind as messages name it; "" means PodGroup.
	Kind     string
	Resource schema.GroupVersionResource
	// Status says which status fields the project's own controllers write (package podgroup
	// writes the same ones); Condition, for StatusConditions, is the condition's type.
	Status    StatusStyle
	Condition string
	// key is the name pods' markers give these objects (gangspec.Membership.Group).
	key func(namespace, name string) string
	// quorum reads the gang's min-available; nil reads spec.minMember.
	quorum func(r fields) (int, error)
	// quorumField is the field quorum reads, for reasons ("" with quorum nil: spec.minMember).
	quorumField string
	// extra reads the fields beyond the quorum; nil reads none.
	extra func(obj *unstructured.Unstructured, r fields, spec *gangspec.Spec) error
}

// StatusStyle is a family of PodGroup status layouts.
type StatusStyle int

const (
	// StatusVolcano: phase Pending, Inqueue, Running and an Unschedulable condition (Volcano and
	// kube-batch, which Volcano grew from).
	StatusVolcano StatusStyle = iota
	// StatusCoscheduling: scheduler-plugins' phase Pending, Scheduling, Running and
	// scheduleStartTime; its v1alpha1 has no Scheduled phase and no count of scheduled pods.
	StatusCoscheduling
	// StatusKoordinator: Koordinator kept an older scheduler-plugins PodGroup, which has phase
	// Scheduled and status.scheduled besides.
	StatusKoordinator
	// StatusConditions: Kubernetes' own PodGroup, whose only status is the condition
	// kube-scheduler's gang scheduling writes (API.Condition: PodGroupInitiallyScheduled in 1.37,
	// PodGroupScheduled in 1.36).
	StatusConditions
	// StatusOwned: the object's status belongs to another controller (Kueue's Workloads);
	// lockstep writes none.
	StatusOwned
	// StatusKAI: KAI Scheduler's PodGroup, which has no phase: its scheduler writes one
	// UnschedulableOnNodePool entry in status.schedulingConditions while the group cannot be
	// placed, and clears them once its pods are.
	StatusKAI
)

var (
	// Coscheduling is scheduler-plugins' PodGroup, named by label scheduling.x-k8s.io/pod-group.
	Coscheduling = API{Dialect: "scheduler-plugins", Resource: podGroups("scheduling.x-k8s.io", "v1alpha1"),
		Status: StatusCoscheduling, key: CoschedulingKey, extra: scheduleTimeout}
	// Koordinator is Koordinator's PodGroup, named by label pod-group.scheduling.sigs.k8s.io.
	Koordinator = API{Dialect: "Koordinator", Resource: podGroups("scheduling.sigs.k8s.io", "v1alpha1"),
		Status: StatusKoordinator, key: KoordinatorKey, extra: koordinatorGroup}
	// Volcano is Volcano's PodGroup, named by annotation scheduling.k8s.io/group-name.
	Volcano = API{Dialect: "Volcano", Resource: podGroups("scheduling.volcano.sh", "v1beta1"),
		Status: StatusVolcano, key: GroupNameKey, extra: volcanoGroup}
	// KubeBatch and KubeBatchV1alpha2 are kube-batch's PodGroups, named by the same annotation.
	KubeBatch = API{Dialect: "kube-batch", Resource: podGroups("scheduling.incubator.k8s.io", "v1alpha1"),
		Status: StatusVolcano, key: GroupNameKey, extra: queueRef(KindKubeBatchQueue)}
	KubeBatchV1alpha2 = API{Dialect: "kube-batch", Resource: podGroups("scheduling.sigs.dev", "v1alpha2"),
		Status: StatusVolcano, key: GroupNameKey, extra: queueRef(KindKubeBatchQueue)}
)

// APIs are every group-object API lockstep reads, in the order of precedence used when one
// name resolves to objects of several (see Choose).
func APIs() []API {
	return []API{Coscheduling, Koordinator, Volcano, KubeBatch, KubeBatchV1alpha2, Native, NativeV1alpha2, KueueWorkload, KAI}
}

func podGroups(group, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: "podgroups"}
}

// CoschedulingKey, KoordinatorKey and GroupNameKey name a group object the way pods' markers
// do. Volcano and kube-batch share one key because their pods share one annotation.
func CoschedulingKey(namespace, name string) string {
	return "scheduler-plugins PodGroup " + namespace + "/" + name
}

func KoordinatorKey(namespace, name string) string {
	return "Koordinator PodGroup " + namespace + "/" + name
}

func GroupNameKey(namespace, name string) string {
	return "Volcano or kube-batch PodGroup " + namespace + "/" + name
}

// Key is the name pods' markers give the object namespace/name of this API.
func (a API) Key(namespace, name string) string { return a.key(namespace, name) }

// Object names one object of this API for people: "Volcano PodGroup team-a/job-1".
func (a API) Object(namespace, name string) string {
	kind := a.Kind
	if kind == "" {
		kind = "PodGroup"
	}
	return a.Dialect + " " + kind + " " + namespace + "/" + name
}

// Parse reads a group object's rules. Every refusal is a FieldError naming the object and the
// field.
func (a API) Parse(obj *unstructured.Unstructured) (*gangspec.Spec, error) {
	object := a.Object(obj.GetNamespace(), obj.GetName())
	r := fields{object: object, obj: obj.Object}
	spec := &gangspec.Spec{Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Source: fmt.Sprintf("%s (%s/%s)", object, a.Resource.Group, a.Resource.Version)}
	quorum := a.quorum
	if quorum == nil {
		quorum = minMember
	}
	var err error
	if spec.MinAvailable, err = quorum(r); err != nil {
		return nil, err
	}
	if a.quorumField != "" || a.quorum == nil {
		spec.QuorumFrom = cmp.Or(a.quorumField, "spec.minMember") + " of " + object
	}
	if a.extra != nil {
		if err := a.extra(obj, r, spec); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// minMember reads spec.minMember, the quorum of every PodGroup that grew from kube-batch's. 0
// asks for no quorum: Volcano's job controller writes the vcjob's minAvailable, 0 when the job
// sets none and no admission webhook filled it in, and Volcano's, kube-batch's and
// scheduler-plugins' schedulers then find the group ready with any number of members placed.
// lockstep places such members one by one, a quorum of 1.
func minMember(r fields) (int, error) {
	n, ok, err := r.int("spec", "minMember")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, r.bad("spec.minMember", "", "missing: the group must say how many members must be placed together")
	case n < 0:
		return 0, r.bad("spec.minMember", fmt.Sprint(n), "must not be negative (0 places every member on its own)")
	case n == 0:
		return 1, nil
	}
	return int(n), nil
}

// scheduleTimeout reads spec.scheduleTimeoutSeconds, scheduler-plugins' and Koordinator's
// waiting time. 0 asks for the default waiting time: scheduler-plugins' Permit takes its plugin's
// own timeout for 0 (pkg/coscheduling, "wait != 0"), and the Kubeflow MPI operator writes 0 on
// every PodGroup whose job sets no timeout. Koordinator would wait 0s, so no gang of its could
// ever assemble; lockstep gives its PodGroups the default too.
func scheduleTimeout(_ *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	secs, ok, err := r.int("spec", "scheduleTimeoutSeconds")
	if err != nil || !ok || secs == 0 {
		return err
	}
	if secs < 0 {
		return r.bad("spec.scheduleTimeoutSeconds", fmt.Sprint(secs), "must not be negative (0 or absent takes the default waiting time)")
	}
	// Past this many seconds the Duration overflows: found by FuzzPodGroup, 9223372037 came out
	// negative (so the default waiting time) and 18446744074 as 0.29s.
	if maxSecs := int64(math.MaxInt64 / time.Second); secs > maxSecs {
		return r.bad("spec.scheduleTimeoutSeconds", fmt.Sprint(secs), fmt.Sprintf("must be at most %d (292 years)", maxSecs))
	}
	spec.WaitingTime = time.Duration(secs) * time.Second
	return nil
}

// koordinatorGroup reads a Koordinator PodGroup: scheduler-plugins' fields, and Koordinator's
// gang annotations on the object itself.
func koordinatorGroup(obj *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	if err := scheduleTimeout(obj, r, spec); err != nil {
		return err
	}
	return annotations{object: r.object, values: obj.GetAnnotations()}.koordinatorOptions(spec)
}

// volcanoGroup reads Volcano's own fields: task quorums, the network topology and the queue.
func volcanoGroup(obj *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	if err := taskQuorums(obj, r, spec); err != nil {
		return err
	}
	if err := networkTopology(r, spec); err != nil {
		return err
	}
	return queueRef(KindVolcanoQueue)(obj, r, spec)
}

// queueRef reads spec.queue, the name of a queue of kind. Empty or absent asks for the
// namespace's default queue of that kind, else quota.DefaultName: Volcano's PodGroup admission
// webhook writes the namespace's annotation there, else "default", and kube-batch's scheduler
// takes its --default-queue, "default" unless changed.
func queueRef(kind string) func(*unstructured.Unstructured, fields, *gangspec.Spec) error {
	return func(_ *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
		raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "queue")
		name, isString := raw.(string)
		if found && raw != nil && !isString {
			return r.bad("spec.queue", fmt.Sprint(raw), "must be the name of a "+kind)
		}
		spec.Queue = quota.Ref{Kind: kind, Name: name, Fallback: quota.DefaultName}
		return nil
	}
}

// networkTopology reads Volcano's spec.networkTopology (Volcano 1.12 and later): mode hard (the
// default) or soft, and the widest tier allowed, by number (1 the narrowest) or by name.
func networkTopology(r fields, spec *gangspec.Spec) error {
	nt, err := r.mapField("must be an object with mode and highestTierAllowed or highestTierName", "spec", "networkTopology")
	if nt == nil {
		return err
	}
	t := gangspec.Topology{Required: true, Source: "spec.networkTopology of " + r.object}
	raw, given := nt["mode"]
	mode, isString := raw.(string)
	if given && raw != nil && !isString {
		return r.bad("spec.networkTopology.mode", fmt.Sprint(raw), "must be hard or soft")
	}
	switch mode {
	case "hard", "": // Volcano's default is hard
	case "soft":
		t.Required = false
	default:
		return r.bad("spec.networkTopology.mode", mode, "must be hard or soft")
	}
	tier, hasTier, err := r.int("spec", "networkTopology", "highestTierAllowed")
	if err != nil {
		return err
	}
	name, _ := nt["highestTierName"].(string)
	switch {
	case hasTier && name != "":
		return r.bad("spec.networkTopology", fmt.Sprint(nt), "set highestTierAllowed or highestTierName, not both")
	case hasTier && tier < 1:
		return r.bad("spec.networkTopology.highestTierAllowed", fmt.Sprint(tier), "must be at least 1 (the narrowest tier)")
	case !hasTier && name == "":
		return r.bad("spec.networkTopology", fmt.Sprint(nt), "needs highestTierAllowed or highestTierName")
	}
	t.Tier, t.Key = int(tier), name
	spec.Topology = t
	return nil
}

// taskQuorums reads Volcano's spec.minTaskMember: per task, how many members must be placed
// together with the rest. A task with 0 asks nothing.
func taskQuorums(_ *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	tasks, err := r.mapField("must map task names to counts", "spec", "minTaskMember")
	if tasks == nil {
		return err
	}
	for task, v := range tasks {
		n, err := r.toInt("spec.minTaskMember."+task, v)
		if err != nil {
			return err
		}
		if n < 0 {
			return r.bad("spec.minTaskMember."+task, fmt.Sprint(n), "must not be negative")
		}
		if n > 0 {
			if spec.MinPerTask == nil {
				spec.MinPerTask = map[string]int{}
			}
			spec.MinPerTask[task] = int(n)
		}
	}
	return nil
}

// fields reads an unstructured object's fields and words refusals.
type fields struct {
	object string
	obj    map[string]any
}

func (r fields) bad(field, value, reason string) error {
	return &gangspec.FieldError{Object: r.object, Field: field, Value: value, Reason: reason}
}

// int reads an integer field; ok is false when it is absent or null.
func (r fields) int(path ...string) (n int64, ok bool, err error) {
	v, found, _ := unstructured.NestedFieldNoCopy(r.obj, path...)
	if !found || v == nil {
		return 0, false, nil
	}
	n, err = r.toInt(strings.Join(path, "."), v)
	return n, err == nil, err
}

// mapField reads an object field: nil without an error when it is absent or null, and refused
// with the reason want when it is not an object.
func (r fields) mapField(want string, path ...string) (map[string]any, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, path...)
	if !found || raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, r.bad(strings.Join(path, "."), fmt.Sprint(raw), want)
	}
	return m, nil
}

// toInt accepts the number types a decoded JSON object holds, and nothing that is not a whole
// number.
func (r fields) toInt(field string, v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	return 0, r.bad(field, fmt.Sprint(v), "must be a whole number")
}

// Found is a group object that exists, with its reading.
type Found struct {
	API             API
	Namespace, Name string
	Spec            *gangspec.Spec
	Err             error
}

// Choose settles which of the objects that share a key holds a gang's rules: the one, or an
// error naming all when there are several (kube-batch and Volcano PodGroups of one name in one
// namespace, both named by annotation scheduling.k8s.io/group-name). found is in APIs() order.
func Choose(found []Found) (*gangspec.Spec, error) {
	found = oneVersionEach(found)
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0].Spec, found[0].Err
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = fmt.Sprintf("%s (%s)", f.API.Object(f.Namespace, f.Name), f.API.Resource.GroupVersion())
	}
	return nil, fmt.Errorf("%s all exist, and annotation %s names them alike; lockstep cannot tell which holds the gang's rules: delete all but one",
		strings.Join(names, " and "), wellknown.AnnotationGroupName)
}

// oneVersionEach keeps, of objects read from several versions of one API (the same object, as an
// apiserver serving both a PodGroup's v1beta1 and an older version hands it over twice), the one
// of the version APIs lists first: the newest.
func oneVersionEach(found []Found) []Found {
	out := found[:0:0]
	seen := map[schema.GroupResource]bool{}
	for _, f := range found {
		if gr := f.API.Resource.GroupResource(); !seen[gr] {
			seen[gr] = true
			out = append(out, f)
		}
	}
	return out
}
