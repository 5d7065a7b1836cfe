package dialect

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// YuniKorn's queues live in no object of their own: its shim reads them from the queues.yaml of
// two ConfigMaps, and places each application in a queue by its placement rules. Read against
// apache/yunikorn-core at be3bb487 (July 2026; YuniKorn 1.9): pkg/common/configs (the file's
// shape and validation), pkg/common/resources (quantities) and pkg/scheduler/placement.
//
// What lockstep reads of it, and how (docs/dialects.md says the same for users):
//   - Partition "default" only: the shim schedules every pod into it.
//   - Every queue under root, by its full lowercased path ("root.research.nlp"), nested as the file
//     nests it; resources.guaranteed is its min, resources.max its limit. YuniKorn shares what is
//     left over the guarantees by usage alone, so every queue weighs 1.
//   - A placement rule with create: true makes the queues work names that the file does not
//     define, as YuniKorn makes them: open and unlimited (quota.Queue.KindMadeOnDemand).
//   - A pod goes to the queue it names, qualified under root as the provided rule does, else to
//     root.<namespace>, the queue of the tag rule YuniKorn's default configuration has.
//   - A problem in one queue's fields makes that queue unusable and leaves the others working;
//     a file that cannot be read at all leaves the last one read in force, as YuniKorn does.

// yunikornQueueName is YuniKorn's rule for one part of a queue path (configs.QueueNameRegExp).
var yunikornQueueName = regexp.MustCompile(`^[a-zA-Z0-9_:#/@-]{1,64}$`)

const (
	yunikornRoot      = "root"
	yunikornPartition = "default"
)

// yunikornFile is the part of queues.yaml lockstep reads, with YuniKorn's own keys: the yaml
// package lowercases field names, as YuniKorn's does.
type yunikornFile struct {
	Partitions []struct {
		Name           string
		Queues         []yunikornQueueConfig
		PlacementRules []struct{ Create bool }
	}
}

type yunikornQueueConfig struct {
	Name      string
	Resources struct {
		Guaranteed map[string]any
		Max        map[string]any
	}
	Queues []yunikornQueueConfig
}

// YuniKornQueues reads YuniKorn's queues from its ConfigMaps, given in the order the shim merges
// them (wellknown.ConfigMapYuniKornDefaults, then ConfigMapYuniKornConfigs). from is the ConfigMap
// whose queues.yaml was read; nil, with no queues, when neither has one. err says why the file
// cannot be read at all, naming the ConfigMap.
func YuniKornQueues(maps ...*corev1.ConfigMap) (queues []quota.Queue, from *corev1.ConfigMap, err error) {
	var text string
	for _, cm := range maps {
		if cm == nil {
			continue
		}
		if v, ok := cm.Data[wellknown.YuniKornQueuesKey]; ok {
			text, from = v, cm
		}
	}
	if from == nil {
		return nil, nil, nil
	}
	object := fmt.Sprintf("%s of ConfigMap %s/%s", wellknown.YuniKornQueuesKey, from.Namespace, from.Name)
	var file yunikornFile
	if err := yaml.Unmarshal([]byte(text), &file); err != nil {
		return nil, from, fmt.Errorf("%s cannot be read: %v", object, err)
	}
	for _, p := range file.Partitions {
		if !strings.EqualFold(p.Name, yunikornPartition) {
			continue
		}
		top, err := yunikornTop(object, p.Queues)
		if err != nil {
			return nil, from, err
		}
		onDemand := false
		for _, rule := range p.PlacementRules {
			onDemand = onDemand || rule.Create
		}
		r := yunikornReader{object: object, onDemand: onDemand}
		for _, q := range top {
			r.read(q, "")
		}
		return r.queues, from, nil
	}
	return nil, from, fmt.Errorf("%s has no partition %q, the one YuniKorn's shim schedules into", object, yunikornPartition)
}

// yunikornTop is the queues under root: YuniKorn puts a root above a file's top queues when
// they are not one queue named root, and allows the root no resources.
func yunikornTop(object string, top []yunikornQueueConfig) ([]yunikornQueueConfig, error) {
	if len(top) != 1 || !strings.EqualFold(top[0].Name, yunikornRoot) {
		return top, nil
	}
	root := top[0]
	if root.Resources.Guaranteed != nil || root.Resources.Max != nil {
		return nil, fmt.Errorf("%s: the root queue has resources, and YuniKorn allows it none (it is the whole partition)", object)
	}
	return root.Queues, nil
}

// yunikornReader collects a file's queues.
type yunikornReader struct {
	object   string
	onDemand bool
	queues   []quota.Queue
	seen     map[string]int
}

// read adds conf, under the queue path parent ("" for root), and its children.
func (r *yunikornReader) read(conf yunikornQueueConfig, parent string) {
	name := strings.ToLower(conf.Name)
	path := yunikornRoot + "." + name
	if parent != "" {
		path = parent + "." + name
	}
	q := quota.Queue{Kind: KindYuniKornQueue, Name: path, Parent: parent, ParentField: "its place in " + r.object,
		Source: fmt.Sprintf("%s %s (%s)", KindYuniKornQueue, path, r.object), Weight: 1, State: quota.Open, Reclaimable: true,
		KindMadeOnDemand: r.onDemand}
	f := fields{object: q.Source, obj: map[string]any{}}
	if min, limit, err := r.check(conf, path, f); err != nil {
		q.Err = err
	} else {
		q.Min, q.Capability = min, limit
	}
	r.add(q)
	for _, child := range conf.Queues {
		r.read(child, path)
	}
}

// check refuses what YuniKorn's validator refuses of one queue: a name it does not allow, a name
// its parent lists twice (YuniKorn compares them lowercased), an amount it cannot read, and more
// guaranteed than max.
func (r *yunikornReader) check(conf yunikornQueueConfig, path string, f fields) (quota.Resources, quota.Limit, error) {
	if !yunikornQueueName.MatchString(conf.Name) {
		return quota.Resources{}, quota.Unlimited, f.bad("name", conf.Name, "must be 1 to 64 letters, digits or _:#/@-, as YuniKorn requires")
	}
	if _, dup := r.seen[path]; dup {
		return quota.Resources{}, quota.Unlimited, f.bad("name", conf.Name, "is listed twice under the same parent (YuniKorn compares names lowercased)")
	}
	min, _, err := yunikornResources(f, "resources.guaranteed", conf.Resources.Guaranteed)
	if err != nil {
		return quota.Resources{}, quota.Unlimited, err
	}
	max, named, err := yunikornResources(f, "resources.max", conf.Resources.Max)
	if err != nil {
		return quota.Resources{}, quota.Unlimited, err
	}
	limit := quota.Limit{Amount: max, Named: named}
	if err := f.within("resources.guaranteed", min, "resources.max", limit, "YuniKorn refuses a queue guaranteed more than its max"); err != nil {
		return quota.Resources{}, quota.Unlimited, err
	}
	return min, limit, nil
}

// add keeps q; a second queue of one path makes the first unusable too, since neither is the
// queue YuniKorn would keep.
func (r *yunikornReader) add(q quota.Queue) {
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	if i, dup := r.seen[q.Name]; dup {
		r.queues[i].Err = q.Err
		return
	}
	r.seen[q.Name] = len(r.queues)
	r.queues = append(r.queues, q)
}

// yunikornNames are the keys of queues.yaml's resource lists: vcore (cores, or millicores with
// m), memory (bytes, with Kubernetes' suffixes) and the GPUs by their Kubernetes name. YuniKorn
// keys the others by name too, and lockstep counts none of them.
var yunikornNames = []namedResource{
	{"nvidia.com/gpu", countedResource{wellknown.ResourceGPU, quota.GPU}},
	{"vcore", countedResource{corev1.ResourceCPU, quota.CPU}},
	{"memory", countedResource{corev1.ResourceMemory, quota.Memory}},
}

func yunikornResources(f fields, field string, list map[string]any) (quota.Resources, quota.ResourceSet, error) {
	return listedResources(f, field, list, yunikornNames)
}

// YuniKornPodQueue is the queue YuniKorn places a pod's application in when the pod names queue
// ("" for none): the named queue, lowercased and put under root unless it is a full path (the
// provided rule), else root.<namespace> (the tag rule of YuniKorn's default configuration).
func YuniKornPodQueue(namespace, queue string) string {
	queue = strings.ToLower(queue)
	switch {
	case queue == "":
		return yunikornRoot + "." + namespace
	case strings.HasPrefix(queue, yunikornRoot+"."):
		return queue
	}
	return yunikornRoot + "." + strings.ReplaceAll(queue, ".", "_dot_")
}

// YuniKornNamespaceQueue reads a Namespace's YuniKorn annotations as the queue YuniKorn gives its
// applications, root.<namespace>: namespace.quota is its max and namespace.guaranteed its min.
// ok is false when the Namespace has neither. It applies only while queues.yaml does not define
// that queue, as YuniKorn sets it only on queues it makes. YuniKorn ignores an annotation it
// cannot read; lockstep refuses the queue, so that the namespace's gangs wait with the reason
// rather than run unbounded.
func YuniKornNamespaceQueue(ns *corev1.Namespace) (q quota.Queue, ok bool) {
	quotaText, hasQuota := ns.Annotations[wellknown.AnnotationYuniKornNamespaceQuota]
	guaranteedText, hasGuaranteed := ns.Annotations[wellknown.AnnotationYuniKornNamespaceGuaranteed]
	if !hasQuota && !hasGuaranteed {
		return quota.Queue{}, false
	}
	name := YuniKornPodQueue(ns.Name, "")
	q = quota.Queue{Kind: KindYuniKornQueue, Name: name, Weight: 1, State: quota.Open, Reclaimable: true, KindMadeOnDemand: true,
		Source: fmt.Sprintf("%s %s (annotations of Namespace %s)", KindYuniKornQueue, name, ns.Name)}
	f := fields{object: "Namespace " + ns.Name, obj: map[string]any{}}
	max, named, err := annotationResources(f, wellknown.AnnotationYuniKornNamespaceQuota, quotaText)
	if err == nil {
		q.Capability = quota.Limit{Amount: max, Named: named}
		q.Min, _, err = annotationResources(f, wellknown.AnnotationYuniKornNamespaceGuaranteed, guaranteedText)
	}
	if err == nil {
		err = f.within(annotationField(wellknown.AnnotationYuniKornNamespaceGuaranteed), q.Min,
			annotationField(wellknown.AnnotationYuniKornNamespaceQuota), q.Capability, "a namespace cannot be guaranteed more than its quota")
	}
	if err != nil {
		q.Capability, q.Min, q.Err = quota.Unlimited, quota.Resources{}, err
	}
	return q, true
}

// annotationResources reads an annotation holding a JSON resource list with Kubernetes' names,
// such as {"cpu":"8","nvidia.com/gpu":"4"}; "" is an empty list.
func annotationResources(f fields, key, text string) (quota.Resources, quota.ResourceSet, error) {
	if text == "" {
		return quota.Resources{}, 0, nil
	}
	var list map[string]any
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return quota.Resources{}, 0, f.bad(annotationField(key), text, `must be a JSON resource list, such as {"cpu":"8","nvidia.com/gpu":"4"}`)
	}
	return listedResources(f, annotationField(key), list, kubernetesNames)
}
