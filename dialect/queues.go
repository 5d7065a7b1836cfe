package dialect

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The kinds of queue lockstep reads, as reasons and /debug/queues name them. A kind and a queue's
// name make its key (quota.Key): "Volcano Queue team-a", "ElasticQuota team-a/quota".
const (
	KindVolcanoQueue   = "Volcano Queue"
	KindKubeBatchQueue = "kube-batch Queue"
	// KindElasticQuota is scheduler-plugins' ElasticQuota (scheduling.x-k8s.io);
	// KindKoordinatorElasticQuota is Koordinator's of the same name (scheduling.sigs.k8s.io).
	KindElasticQuota            = "ElasticQuota"
	KindKoordinatorElasticQuota = "Koordinator ElasticQuota"
)

// MaxQuantity bounds every amount a queue object may name, in lockstep's units (millicores,
// bytes, GPUs): 2^56 is 64 PiB of memory, yet thousands of such amounts still add up without
// overflowing int64. resource.Quantity itself overflows silently: 1e21 reads as 0 millicores.
const MaxQuantity = 1 << 56

// QueueAPI is one queue or quota API lockstep reads: a Queue or ElasticQuota kind of one
// project, at one version.
type QueueAPI struct {
	// Dialect is the project whose users write these objects.
	Dialect  string
	Resource schema.GroupVersionResource
	// Kind is the quota kind for people, and the first half of every key (see KindVolcanoQueue).
	Kind string
	// Namespaced objects apply to every pod of their namespace (an ElasticQuota); cluster-scoped
	// ones only to the gangs whose PodGroup names them.
	Namespaced bool
	// nameAlone marks a namespaced kind whose objects are named by their name alone, which the
	// project keeps unique across namespaces (Koordinator's ElasticQuota: a pod's quota label
	// names a bare name). Such a quota applies to the namespaces it covers (quota.Queue.Namespaces)
	// rather than to the one it lives in.
	nameAlone bool
	// Usage is the field under status where the project's own scheduler or controller writes
	// what the queue holds, as a resource list; "" when it writes none. lockstep writes the same.
	Usage string
	// pool marks the kind whose quotas together hold at most the sum of their mins
	// (quota.Queue.BorrowsOnlyMin): a property of the kind, kept even on an object with an error.
	pool bool
	// reads are the field readers, in the order refusals are looked for.
	reads []queueReader
}

// queueReader reads some of a queue object's fields into q, or refuses the object.
type queueReader func(r fields, q *quota.Queue) error

var (
	// VolcanoQueue is Volcano's Queue (volcano.sh/apis v1.10.0), cluster-scoped; a PodGroup's
	// spec.queue names it.
	VolcanoQueue = QueueAPI{Dialect: "Volcano", Resource: queues("scheduling.volcano.sh", "v1beta1"), Kind: KindVolcanoQueue,
		Usage: "allocated", reads: []queueReader{readWeight, readVolcanoCapability, readGuarantee, readDeserved, readVolcanoParent, readReclaimable, readPriority, readState}}
	// KubeBatchQueue and KubeBatchQueueV1alpha2 are kube-batch's Queues (v0.5.0), cluster-scoped.
	// kube-batch keeps queues of both versions in one set by name, and so does lockstep.
	KubeBatchQueue = QueueAPI{Dialect: "kube-batch", Resource: queues("scheduling.incubator.k8s.io", "v1alpha1"), Kind: KindKubeBatchQueue,
		reads: []queueReader{readWeight, readCapability}}
	KubeBatchQueueV1alpha2 = QueueAPI{Dialect: "kube-batch", Resource: queues("scheduling.sigs.dev", "v1alpha2"), Kind: KindKubeBatchQueue,
		reads: []queueReader{readWeight, readCapability}}
	// ElasticQuota is scheduler-plugins' ElasticQuota (v0.28.9), namespaced: it applies to every
	// pod of its namespace.
	ElasticQuota = QueueAPI{Dialect: "scheduler-plugins", Resource: schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"},
		Kind: KindElasticQuota, Namespaced: true, Usage: "used", pool: true, reads: []queueReader{readMin, readMax}}
	// KoordinatorElasticQuota is Koordinator's ElasticQuota (v1.6.0), namespaced but named by its
	// name alone. It applies to the pods that name it by label, to those of the namespace it is
	// named after and of the namespaces its annotation lists; koordinator-default-quota to all
	// the others. Its tree labels (parent, is-parent) nest it as koord-scheduler does.
	KoordinatorElasticQuota = QueueAPI{Dialect: "Koordinator", Resource: schema.GroupVersionResource{Group: "scheduling.sigs.k8s.io", Version: "v1alpha1", Resource: "elasticquotas"},
		Kind: KindKoordinatorElasticQuota, Namespaced: true, nameAlone: true, Usage: "used",
		reads: []queueReader{readKoordinatorNamespaces, readMin, readMax, readSharedWeight, readAllowLent, readKoordinatorTree}}
)

// QueueAPIs are every queue API lockstep reads, in the order used when one key resolves to
// objects of several (see ChooseQueue).
func QueueAPIs() []QueueAPI {
	return []QueueAPI{VolcanoQueue, KubeBatchQueue, KubeBatchQueueV1alpha2, ElasticQuota, KoordinatorElasticQuota, KAIQueue}
}

func queues(group, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: "queues"}
}

// Name is the queue name of the object namespace/name: its name, or namespace/name for a
// namespaced one (namespace is ignored for a cluster-scoped one).
func (a QueueAPI) Name(namespace, name string) string {
	if a.Namespaced && !a.nameAlone {
		return namespace + "/" + name
	}
	return name
}

// Key is the quota key of the object namespace/name.
func (a QueueAPI) Key(namespace, name string) string {
	return quota.Key(a.Kind, a.Name(namespace, name))
}

// Object names the object for people: "Volcano Queue team-a", "ElasticQuota team-a/quota".
func (a QueueAPI) Object(namespace, name string) string { return a.Key(namespace, name) }

// covers is the namespaces a quota the API names alone covers by its name and place: the
// namespace it is named after, when it lives there, and every other one for Koordinator's default
// quota, wherever it lives (koord-scheduler finds both by name).
func (a QueueAPI) covers(namespace, name string) []string {
	switch {
	case !a.nameAlone:
		return nil
	case name == wellknown.KoordinatorDefaultQuota:
		return []string{quota.AllNamespaces}
	case name == namespace:
		return []string{namespace}
	}
	return nil
}

// Parse reads a queue object. It never fails: an object lockstep cannot use is a queue with
// Err set, a FieldError naming the object and the field, so that its gangs wait with that
// reason rather than schedule as if it did not exist. Such a queue keeps its identity and the
// kind's defaults and nothing it read, so that its bad numbers weigh on no other queue.
func (a QueueAPI) Parse(obj *unstructured.Unstructured) quota.Queue {
	base := a.base(obj.GetNamespace(), obj.GetName())
	r := fields{object: a.Object(obj.GetNamespace(), obj.GetName()), obj: obj.Object}
	q := base
	for _, read := range a.reads {
		if err := read(r, &q); err != nil {
			return unusable(q, err)
		}
	}
	return q
}

// unusable is q refused with err: its identity, the namespaces it covers (so that their pods wait
// with the reason) and the defaults of an object that says nothing, and nothing else it read.
func unusable(q quota.Queue, err error) quota.Queue {
	return quota.Queue{Kind: q.Kind, Name: q.Name, Namespace: q.Namespace, Namespaces: q.Namespaces, Source: q.Source, BorrowsOnlyMin: q.BorrowsOnlyMin,
		Weight: 1, State: quota.Open, Reclaimable: true, Err: err}
}

// base is what every queue of the API starts from: the defaults of an object that says nothing,
// as the projects' own webhooks and controllers fill them (weight 1, open, reclaimable).
func (a QueueAPI) base(namespace, name string) quota.Queue {
	q := quota.Queue{Kind: a.Kind, Name: a.Name(namespace, name), Weight: 1, State: quota.Open, Reclaimable: true, BorrowsOnlyMin: a.pool,
		Source: fmt.Sprintf("%s (%s)", a.Object(namespace, name), a.Resource.GroupVersion()), Namespaces: a.covers(namespace, name)}
	if a.nameAlone {
		q.Source = fmt.Sprintf("%s in namespace %s (%s)", a.Object(namespace, name), namespace, a.Resource.GroupVersion())
	} else if a.Namespaced {
		q.Namespace = namespace
	}
	return q
}

// readWeight reads spec.weight. Absent or 0 is 1: Volcano's admission webhook writes 1 there,
// and kube-batch, which has no default, would give such a queue no share at all.
func readWeight(r fields, q *quota.Queue) error {
	w, ok, err := r.int("spec", "weight")
	switch {
	case err != nil:
		return err
	case !ok || w == 0:
		return nil
	case w < 0:
		return r.bad("spec.weight", fmt.Sprint(w), "must be positive")
	case w > math.MaxInt32:
		return r.bad("spec.weight", fmt.Sprint(w), fmt.Sprintf("must be at most %d", math.MaxInt32))
	}
	q.Weight = w
	return nil
}

// readCapability reads spec.capability: a limit on each resource it names, none on the others.
func readCapability(r fields, q *quota.Queue) error {
	amounts, named, err := r.resources("spec", "capability")
	q.Capability = quota.Limit{Amount: amounts, Named: named}
	return err
}

// readVolcanoCapability is readCapability as Volcano's proportion plugin reads it: a cpu or
// memory capability of 0 is no limit (proportion.go replaces it by the largest float), while
// a GPU capability of 0 allows no GPU.
func readVolcanoCapability(r fields, q *quota.Queue) error {
	if err := readCapability(r, q); err != nil {
		return err
	}
	if q.Capability.Amount.MilliCPU == 0 {
		q.Capability.Named &^= quota.CPU
	}
	if q.Capability.Amount.Memory == 0 {
		q.Capability.Named &^= quota.Memory
	}
	return nil
}

// readGuarantee reads spec.guarantee.resource, which must fit within the capability.
func readGuarantee(r fields, q *quota.Queue) error {
	amounts, _, err := r.resources("spec", "guarantee", "resource")
	if err != nil {
		return err
	}
	q.Guarantee = amounts
	return r.within("spec.guarantee.resource", amounts, "spec.capability", q.Capability, "a queue cannot be guaranteed more than it may hold")
}

// readDeserved reads spec.deserved, the share of Volcano's capacity plugin: what the queue may
// hold while others want more, lent while it leaves it unused and taken back by reclaim beyond
// it, which is lockstep's min. It must fit within the capability, as Volcano's webhook requires.
func readDeserved(r fields, q *quota.Queue) error {
	amounts, _, err := r.resources("spec", "deserved")
	if err != nil {
		return err
	}
	q.Min = amounts
	return r.within("spec.deserved", amounts, "spec.capability", q.Capability, "a queue cannot deserve more than it may hold")
}

// readVolcanoParent reads spec.parent, the parent of Volcano's hierarchical queues. "root" is
// the queue Volcano makes to stand for the whole cluster; its queue controller takes a queue
// that names root, or none, to be at the top, and so does lockstep.
func readVolcanoParent(r fields, q *quota.Queue) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "parent")
	if !found || raw == nil {
		return nil
	}
	parent, ok := raw.(string)
	switch {
	case !ok:
		return r.bad("spec.parent", fmt.Sprint(raw), "must be a queue's name")
	case parent == q.Name:
		return r.bad("spec.parent", parent, "a queue cannot be its own parent")
	case parent != wellknown.VolcanoRootQueue:
		q.Parent, q.ParentField = parent, "spec.parent"
	}
	return nil
}

// readKoordinatorTree reads a Koordinator ElasticQuota's tree labels. A quota that names no
// parent, or koordinator-root-quota, is at the top (koord-scheduler hangs it under the root it
// makes); is-parent "true" marks a quota that only groups others. The root quota itself is the
// cluster, not a parent lockstep enforces.
func readKoordinatorTree(r fields, q *quota.Queue) error {
	if q.Name == wellknown.KoordinatorRootQuota {
		return nil
	}
	if parent, _ := r.label(wellknown.LabelKoordinatorQuotaParent); parent != "" && parent != wellknown.KoordinatorRootQuota {
		if parent == q.Name {
			return r.bad("metadata.labels."+wellknown.LabelKoordinatorQuotaParent, parent, "a quota cannot be its own parent")
		}
		q.Parent, q.ParentField = parent, "metadata.labels."+wellknown.LabelKoordinatorQuotaParent
	}
	q.IsParent = false
	if v, _ := r.label(wellknown.LabelKoordinatorQuotaIsParent); v == "true" {
		q.IsParent = true
	}
	return nil
}

// readMin and readMax read an ElasticQuota's spec.min and spec.max. A resource min leaves out is
// 0, as in scheduler-plugins; one max leaves out is unlimited (see docs/dialects.md for where
// scheduler-plugins differs).
func readMin(r fields, q *quota.Queue) error {
	amounts, _, err := r.resources("spec", "min")
	q.Min = amounts
	return err
}

func readMax(r fields, q *quota.Queue) error {
	amounts, named, err := r.resources("spec", "max")
	if err != nil {
		return err
	}
	q.Capability = quota.Limit{Amount: amounts, Named: named}
	return r.within("spec.min", q.Min, "spec.max", q.Capability, "a quota's min cannot be more than its max")
}

// readKoordinatorNamespaces reads the namespaces annotation of a Koordinator ElasticQuota, a
// JSON list of the namespaces it covers besides the one it is named after. koord-scheduler
// ignores a list it cannot decode; lockstep refuses it, so that those namespaces' pods do not
// silently go unquota'd.
func readKoordinatorNamespaces(r fields, q *quota.Queue) error {
	raw, ok := r.annotation(wellknown.AnnotationKoordinatorQuotaNamespaces)
	if !ok || raw == "" {
		return nil
	}
	var namespaces []string
	if err := json.Unmarshal([]byte(raw), &namespaces); err != nil {
		return r.bad(annotationField(wellknown.AnnotationKoordinatorQuotaNamespaces), raw, `must be a JSON list of namespace names, such as ["team-a","team-b"]`)
	}
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return r.bad(annotationField(wellknown.AnnotationKoordinatorQuotaNamespaces), raw, fmt.Sprintf("%q is not a namespace name: %s", ns, errs[0]))
		}
	}
	q.Namespaces = append(q.Namespaces, namespaces...)
	slices.Sort(q.Namespaces)
	q.Namespaces = slices.Compact(q.Namespaces)
	return nil
}

// readSharedWeight reads a Koordinator ElasticQuota's shared-weight annotation, a JSON resource
// list by which koord-scheduler shares each resource beyond the mins; absent, empty or all zero
// it is spec.max, as extension.GetSharedWeight reads it. lockstep shares by one number: the
// list's GPUs when it names any, else its whole cpu cores, at least 1 (see docs/dialects.md).
func readSharedWeight(r fields, q *quota.Queue) error {
	amounts := q.Capability.Amount
	if raw, ok := r.annotation(wellknown.AnnotationKoordinatorQuotaSharedWeight); ok && raw != "" {
		field := annotationField(wellknown.AnnotationKoordinatorQuotaSharedWeight)
		var list map[string]any
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return r.bad(field, raw, `must be a JSON resource list, such as {"nvidia.com/gpu":"4"}`)
		}
		var written placement.Resources
		for _, res := range countedResources {
			v, ok := list[string(res.name)]
			if !ok || v == nil {
				continue
			}
			n, err := r.amount(field+"."+string(res.name), res.name, v)
			if err != nil {
				return err
			}
			written = withAmount(written, res.name, n)
		}
		if !written.IsZero() {
			amounts = written
		}
	}
	w := int64(1)
	switch {
	case amounts.GPU > 0:
		w = amounts.GPU
	case amounts.MilliCPU >= 1000:
		w = amounts.MilliCPU / 1000
	}
	q.Weight = min(w, math.MaxInt32)
	return nil
}

// readAllowLent reads a Koordinator ElasticQuota's allow-lent-resource label: "false" keeps its
// min for it while it leaves it unused (koord-scheduler then counts the min as the quota's
// request), which is lockstep's guarantee. Any other value, or none, lends it (IsAllowLentResource).
func readAllowLent(r fields, q *quota.Queue) error {
	if v, _ := r.label(wellknown.LabelKoordinatorQuotaAllowLent); v == "false" {
		q.Guarantee = q.Min
	}
	return nil
}

// annotation and label read one metadata key of the object.
func (r fields) annotation(key string) (string, bool) { return r.metadata("annotations", key) }
func (r fields) label(key string) (string, bool)      { return r.metadata("labels", key) }

func (r fields) metadata(kind, key string) (string, bool) {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "metadata", kind, key)
	s, ok := raw.(string)
	return s, found && ok
}

func annotationField(key string) string { return "metadata.annotations." + key }

// readReclaimable reads spec.reclaimable; absent is true, as Volcano reads it.
func readReclaimable(r fields, q *quota.Queue) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "reclaimable")
	if !found || raw == nil {
		return nil
	}
	b, ok := raw.(bool)
	if !ok {
		return r.bad("spec.reclaimable", fmt.Sprint(raw), "must be true or false")
	}
	q.Reclaimable = b
	return nil
}

func readPriority(r fields, q *quota.Queue) error {
	p, ok, err := r.int("spec", "priority")
	switch {
	case err != nil || !ok:
		return err
	case p < math.MinInt32 || p > math.MaxInt32:
		return r.bad("spec.priority", fmt.Sprint(p), "must fit in 32 bits")
	}
	q.Priority = int32(p)
	return nil
}

// readState reads status.state. Absent is Open: Volcano's queue controller writes Open later, and
// a queue just created takes work in Volcano too.
func readState(r fields, q *quota.Queue) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "status", "state")
	if !found || raw == nil || raw == "" {
		return nil
	}
	s, _ := raw.(string)
	state := quota.State(s)
	if !slices.Contains([]quota.State{quota.Open, quota.Closed, quota.Closing, quota.Unknown}, state) {
		return r.bad("status.state", fmt.Sprint(raw), "must be Open, Closed, Closing or Unknown")
	}
	q.State = state
	return nil
}

// countedResource is a resource quotas count, with its bit.
type countedResource struct {
	name corev1.ResourceName
	bit  quota.ResourceSet
}

// countedResources are read in this order, so that the first refusal is the same every time.
var countedResources = []countedResource{
	{wellknown.ResourceGPU, quota.GPU}, {corev1.ResourceCPU, quota.CPU}, {corev1.ResourceMemory, quota.Memory},
}

// namedResource is a resource quotas count, under the key one project's lists give it.
type namedResource struct {
	key string
	countedResource
}

// kubernetesNames are the resources quotas count under Kubernetes' names, as queue objects and
// YuniKorn's namespace annotations give them.
var kubernetesNames = underOwnNames(countedResources)

func underOwnNames(resources []countedResource) []namedResource {
	out := make([]namedResource, len(resources))
	for i, res := range resources {
		out[i] = namedResource{string(res.name), res}
	}
	return out
}

// listedResources reads the amounts of a resource list keyed by names; field names the list.
func listedResources(f fields, field string, list map[string]any, names []namedResource) (quota.Resources, quota.ResourceSet, error) {
	var out quota.Resources
	var named quota.ResourceSet
	for _, res := range names {
		raw, ok := list[res.key]
		if !ok || raw == nil {
			continue
		}
		n, err := f.amount(field+"."+res.key, res.name, raw)
		if err != nil {
			return quota.Resources{}, 0, err
		}
		out = withAmount(out, res.name, n)
		named |= res.bit
	}
	return out, named, nil
}

// resources reads a resource list: the amounts of the resources quotas count and which of them
// it names. Other resource names are not read at all.
func (r fields) resources(path ...string) (placement.Resources, quota.ResourceSet, error) {
	var out placement.Resources
	var named quota.ResourceSet
	list, err := r.mapField("must map resource names to quantities", path...)
	if list == nil {
		return out, named, err
	}
	out, named, err = listedResources(r, strings.Join(path, "."), list, kubernetesNames)
	if err != nil {
		return placement.Resources{}, 0, err
	}
	gpus, ok, err := r.deviceClassGPUs(path, list)
	if ok {
		out.GPU += gpus
		named |= quota.GPU
	}
	return out, named, err
}

// deviceClassGPUs reads the GPUs a resource list names by DRA device class: Volcano's
// deviceclass/<class> keys (Volcano 1.15's DRA quota) and the extended resource every class
// implies, deviceclass.resource.kubernetes.io/<class>, for the classes that count as GPUs by
// default (dra.DefaultGPUClasses). lockstep counts them all as GPUs, beside nvidia.com/gpu.
func (r fields) deviceClassGPUs(path []string, list map[string]any) (int64, bool, error) {
	var sum int64
	found := false
	for _, class := range dra.DefaultGPUClasses {
		for _, key := range []string{"deviceclass/" + class, resourceapi.ResourceDeviceClassPrefix + class} {
			raw, ok := list[key]
			if !ok || raw == nil {
				continue
			}
			v, err := r.amount(strings.Join(path, ".")+"."+key, wellknown.ResourceGPU, raw)
			if err != nil {
				return 0, false, err
			}
			sum, found = sum+v, true
		}
	}
	return sum, found, nil
}

// amount reads one quantity in lockstep's unit for the resource: millicores, bytes, GPUs.
func (r fields) amount(field string, name corev1.ResourceName, raw any) (int64, error) {
	text, ok := quantityText(raw)
	if !ok {
		return 0, r.bad(field, fmt.Sprint(raw), "must be a quantity such as 4, 500m or 16Gi")
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return 0, r.bad(field, text, "must be a quantity such as 4, 500m or 16Gi")
	}
	limit := resource.NewQuantity(MaxQuantity, resource.BinarySI)
	if name == corev1.ResourceCPU {
		limit = resource.NewMilliQuantity(MaxQuantity, resource.DecimalSI)
	}
	switch {
	case q.Sign() < 0:
		return 0, r.bad(field, text, "must not be negative")
	case q.Cmp(*limit) > 0:
		return 0, r.bad(field, text, "must be at most "+limit.String())
	case name == corev1.ResourceCPU:
		return q.MilliValue(), nil
	case name == wellknown.ResourceGPU && q.Cmp(*resource.NewQuantity(q.Value(), resource.DecimalSI)) != 0:
		return 0, r.bad(field, text, "must be a whole number of GPUs")
	}
	return q.Value(), nil
}

// quantityText is a decoded int-or-string quantity as text: a string as written, a number as
// either JSON decoder leaves it.
func quantityText(raw any) (string, bool) {
	switch x := raw.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// within refuses amounts above limit in any resource limit names: field and limitField are
// where each was written.
func (r fields) within(field string, amounts placement.Resources, limitField string, limit quota.Limit, why string) error {
	for _, res := range countedResources {
		have, most := amounts.Get(res.name), limit.Amount.Get(res.name)
		if limit.Named.Has(res.bit) && have > most {
			return r.bad(field+"."+string(res.name), placement.Amount(res.name, have),
				fmt.Sprintf("more than %s.%s, %s: %s", limitField, res.name, placement.Amount(res.name, most), why))
		}
	}
	return nil
}

func withAmount(r placement.Resources, name corev1.ResourceName, v int64) placement.Resources {
	switch name {
	case wellknown.ResourceGPU:
		r.GPU = v
	case corev1.ResourceCPU:
		r.MilliCPU = v
	case corev1.ResourceMemory:
		r.Memory = v
	}
	return r
}

// FoundQueue is a queue object that exists.
type FoundQueue struct {
	API    QueueAPI
	Object *unstructured.Unstructured
}

// ChooseQueue reads the queue that the objects found under one key define, found in QueueAPIs
// order: the one object's reading or, when several APIs hold an object of that name (kube-batch's
// two versions), the first's with an Err naming all. kube-batch keeps whichever its informers
// delivered last; lockstep does not guess. ok is false when nothing was found.
func ChooseQueue(found []FoundQueue) (q quota.Queue, ok bool) {
	if len(found) == 0 {
		return quota.Queue{}, false
	}
	first := found[0]
	q = first.API.Parse(first.Object)
	if len(found) == 1 {
		return q, true
	}
	versions := make([]string, len(found))
	for i, f := range found {
		versions[i] = f.API.Resource.GroupVersion().String()
	}
	return unusable(q, &gangspec.FieldError{Object: q.Key(), Field: "metadata.name", Value: first.Object.GetName(),
		Reason: fmt.Sprintf("exists in %s, which name the same queue: delete all but one", strings.Join(versions, " and "))}), true
}

// AloneInNamespace is q, or q with an Err naming the other quotas that cover namespace, one of
// those q covers, when there are any: scheduler-plugins applies one ElasticQuota per namespace,
// whichever its informer saw first, Koordinator binds a namespace to one quota, and lockstep
// does not guess between them, of whatever kinds. others are their keys, e.g.
// "ElasticQuota team-a/gpu".
func AloneInNamespace(q quota.Queue, namespace string, others []string) quota.Queue {
	if q.Err != nil || len(others) == 0 || namespace == "" {
		return q
	}
	names := slices.Sorted(slices.Values(others))
	field, value := "metadata.namespace", namespace
	switch {
	case namespace == q.Namespace:
	case q.Kind == KindKoordinatorElasticQuota && q.Name == namespace:
		field, value = "metadata.name", q.Name
	default:
		field, value = annotationField(wellknown.AnnotationKoordinatorQuotaNamespaces), namespace
	}
	return unusable(q, &gangspec.FieldError{Object: q.Key(), Field: field, Value: value,
		Reason: fmt.Sprintf("namespace %s also has %s; one applies to a namespace: delete all but one", namespace, strings.Join(names, ", "))})
}
