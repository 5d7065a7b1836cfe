package gang

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/views"
)

// Core is all the rest of lockstep asks of the gang manager, by who asks: the scheduler's verbs
// (package extender), the cluster's news (the informers, package podgroup's group objects, package
// tenancy's queues), and what people and status writers read. Everything else the Manager does is
// unexported and lives beside what it serves; the wiring (cmd/extender) alone also starts and stops
// it (Watch, Stop, SetConditionWriter, Collector). Each caller declares the part it needs, as
// extender.Scheduler, podgroup.Manager and tenancy.Manager do.
type Core interface {
	Verbs
	News
	Readings
}

// Verbs are kube-scheduler's calls, as package extender hands them over.
type Verbs interface {
	Filter(pod *corev1.Pod, nodes []string) FilterResult
	Prioritize(pod *corev1.Pod, nodes []string, dst []int64) []int64
	Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error
	Preempt(pod *corev1.Pod, candidates map[string][]types.UID) PreemptResult
}

// News is what changed in the cluster: pods and nodes (Watch feeds them from informers), group
// objects, and team queues.
type News interface {
	UpsertPod(pod *corev1.Pod)
	DeletePod(uid types.UID)
	UpsertNode(node *corev1.Node)
	DeleteNode(name string)
	SetGroup(r GroupRules)
	DeleteGroup(key, namespace, name string)
	SetQueue(q quota.Queue)
	DeleteQueue(key string)
	SetNamespaceDefault(namespace, kind, name string)
}

// Readings are what /debug shows and what the group objects' and queues' status say.
type Readings interface {
	Status(namespace string) []views.GangStatus
	Nodes(onlyProblems bool) []views.NodeStatus
	Queues() []QueueView
	Standing(gang string) (Standing, bool)
	FitsInTotal(req placement.Resources) (bool, string)
	QueueTakes(namespace, name string, ref quota.Ref, req placement.Resources) (bool, string)
}

var _ Core = (*Manager)(nil)
