// Package wellknown is lockstep's shared vocabulary: the names other programs and people see and
// write (annotation keys, the GPU resource, the extender score scale, event reasons, the pod
// condition). Every package and test builder imports them from here, so a key is spelled once.
//
// It owns names only: no parsing, no behaviour, no imports beyond the API types the names are
// typed with.
package wellknown

import corev1 "k8s.io/api/core/v1"

// ResourceGPU is the extended resource the NVIDIA device plugin advertises.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// MaxScore is the top of the extender priority scale (extenderv1.MaxExtenderPriority).
const MaxScore = 10

// The Koordinator gang annotations, on pods or on a Koordinator PodGroup. lockstep reads the keys
// users already write for Koordinator so that a job moves between the two schedulers without
// edits (package dialect reads every ecosystem's keys below).
const (
	AnnotationGangName         = "gang.scheduling.koordinator.sh/name"
	AnnotationGangMinAvailable = "gang.scheduling.koordinator.sh/min-available"
	AnnotationGangWaitingTime  = "gang.scheduling.koordinator.sh/waiting-time"
	AnnotationGangTotalNumber  = "gang.scheduling.koordinator.sh/total-number"
	AnnotationGangMode         = "gang.scheduling.koordinator.sh/mode"
	AnnotationGangGroups       = "gang.scheduling.koordinator.sh/groups"
	AnnotationGangMatchPolicy  = "gang.scheduling.koordinator.sh/match-policy"
	// AnnotationGangNetworkTopologySpec is Koordinator's network-topology-spec (v1.7 and later):
	// JSON {"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}, the layers named
	// in Koordinator's ClusterNetworkTopology.
	AnnotationGangNetworkTopologySpec = "gang.scheduling.koordinator.sh/network-topology-spec"
)

// Koordinator's ElasticQuota keys (apis/extension/elastic_quota.go, v1.6.0). A pod's label names
// its quota by name (Koordinator's quota names are unique across namespaces); the quota's own
// annotations and labels say which namespaces it covers, how it shares and whether it lends.
const (
	LabelKoordinatorQuotaName              = "quota.scheduling.koordinator.sh/name"
	AnnotationKoordinatorQuotaNamespaces   = "quota.scheduling.koordinator.sh/namespaces"
	AnnotationKoordinatorQuotaSharedWeight = "quota.scheduling.koordinator.sh/shared-weight"
	LabelKoordinatorQuotaAllowLent         = "quota.scheduling.koordinator.sh/allow-lent-resource"
	// KoordinatorDefaultQuota takes the pods no other quota covers; koord-scheduler creates it
	// (in koordinator-system unless configured otherwise).
	KoordinatorDefaultQuota = "koordinator-default-quota"
	// The quota tree: parent names the parent quota (none, or koordinator-root-quota, the root
	// koord-scheduler makes for the cluster, is the top); is-parent "true" marks a quota that
	// only groups others.
	LabelKoordinatorQuotaParent   = "quota.scheduling.koordinator.sh/parent"
	LabelKoordinatorQuotaIsParent = "quota.scheduling.koordinator.sh/is-parent"
	KoordinatorRootQuota          = "koordinator-root-quota"
)

// The other gang dialects' pod markers.
const (
	// LabelKoordinatorPodGroup names a PodGroup of scheduling.sigs.k8s.io (Koordinator's).
	LabelKoordinatorPodGroup = "pod-group.scheduling.sigs.k8s.io"
	// LabelLightweightGangName and LabelLightweightMinAvailable are scheduler-plugins' old
	// lightweight coscheduling labels, which Alibaba ACK's `arena submit --gang` writes and
	// Koordinator still reads.
	LabelLightweightGangName     = "pod-group.scheduling.sigs.k8s.io/name"
	LabelLightweightMinAvailable = "pod-group.scheduling.sigs.k8s.io/min-available"
	// LabelCoschedulingPodGroup names a PodGroup of scheduling.x-k8s.io (scheduler-plugins').
	LabelCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group"
	// AnnotationGroupName names a Volcano or kube-batch PodGroup; both projects use this key.
	AnnotationGroupName = "scheduling.k8s.io/group-name"
	// AnnotationVolcanoTask names a Volcano member's task, for the PodGroup's minTaskMember.
	AnnotationVolcanoTask = "volcano.sh/task-spec"
	// LabelKueuePodGroup and AnnotationKueueTotalCount make a Kueue plain pod group.
	LabelKueuePodGroup        = "kueue.x-k8s.io/pod-group-name"
	AnnotationKueueTotalCount = "kueue.x-k8s.io/pod-group-total-count"
	// AnnotationKueueWorkload names the Kueue Workload a job's pod was admitted under.
	AnnotationKueueWorkload = "kueue.x-k8s.io/workload"
	// AnnotationKueueRequiredTopology and AnnotationKueuePreferredTopology are Kueue's
	// topology-aware scheduling requests, valued with a node label key (a tier).
	AnnotationKueueRequiredTopology  = "kueue.x-k8s.io/podset-required-topology"
	AnnotationKueuePreferredTopology = "kueue.x-k8s.io/podset-preferred-topology"
	// AnnotationVolcanoQueueName, on a Namespace, names the Volcano Queue of the namespace's
	// PodGroups that name none (Volcano's PodGroup admission webhook reads it; volcano.sh/apis
	// v1.10.0 QueueNameAnnotationKey). lockstep reads it on Namespaces only, not on pods.
	AnnotationVolcanoQueueName = "scheduling.volcano.sh/queue-name"
	// VolcanoRootQueue is the queue Volcano's hierarchical queues hang from: it stands for the
	// cluster, and Volcano's webhook names it as the parent of every queue that names none.
	VolcanoRootQueue = "root"
)

// lockstep's own annotations.
const (
	// AnnotationGPUIDs is written by lockstep on every GPU pod it binds, with the binding itself:
	// the indices of the GPUs it chose for the pod on its node, e.g. "0,1,2,3". A device plugin
	// that honours it hands the pod exactly those GPUs; lockstep rebuilds which GPUs are taken
	// from it after a restart.
	AnnotationGPUIDs = "lockstep.dev/gpu-ids"
	// AnnotationGPUTopology is the node annotation that carries a node's GPU topology (package
	// gpu says its format; gpu-agent writes it).
	AnnotationGPUTopology = "lockstep.dev/gpu-topology"
	// AnnotationRequiredTopology and AnnotationPreferredTopology ask, on a gang member, that the
	// gang's quorum fit in one domain of the network tier the value names (a node label key of
	// --topology-tiers): required waits until one does, preferred falls back to the cluster.
	AnnotationRequiredTopology  = "lockstep.dev/required-topology"
	AnnotationPreferredTopology = "lockstep.dev/preferred-topology"

	// AnnotationKeepExtras: "true" on a gang member keeps it from being evicted as one of its
	// gang's members beyond min-available when another gang's quorum waits for the capacity
	// (docs/concepts.md, "Quorums before extras"). "false", or no annotation, lets it go.
	AnnotationKeepExtras = "lockstep.dev/keep-extras"
)

// Event reasons lockstep writes on pods.
const (
	ReasonGangWaiting    = "GangWaiting"
	ReasonGangRejected   = "GangRejected"
	ReasonGangReserved   = "GangReserved"
	ReasonGangBound      = "GangBound"
	ReasonGangBindFailed = "GangBindFailed"
	ReasonGangTimedOut   = "GangTimedOut"
	// ReasonGangReservationYielded: higher-priority work took the gang's reservation.
	ReasonGangReservationYielded = "GangReservationYielded"
	// ReasonGangPreempting: the gang's quorum fits once lower-priority pods are evicted, which
	// lockstep is doing; ReasonPreempted is on each of those pods (the reason kube-scheduler's
	// own preemption gives its victims).
	ReasonGangPreempting = "GangPreempting"
	ReasonPreempted      = "Preempted"
	// ReasonGangDevicesReleased: lockstep gave back the DRA devices a waiting member's claim was
	// allocated, since no reservation holds the member any more.
	ReasonGangDevicesReleased = "GangDevicesReleased"
)

// ReasonGPUTopologyInvalid is the Event reason lockstep writes on a Node whose topology
// annotation it cannot use.
const ReasonGPUTopologyInvalid = "GPUTopologyInvalid"

// ReasonQueueInvalid is the Event reason lockstep writes on a queue or quota object (a Volcano or
// kube-batch Queue, an ElasticQuota) it cannot use; the queue's gangs wait until it is fixed.
const ReasonQueueInvalid = "QueueInvalid"

// ConditionGangScheduled is the pod condition lockstep writes on gang members whose gang's
// situation changed while they wait (package gang says why it is needed).
const ConditionGangScheduled corev1.PodConditionType = "lockstep.dev/GangScheduled"

// Reasons of ConditionGangScheduled.
const (
	ConditionReasonCapacityFreed = "CapacityFreed"
	ConditionReasonTimedOut      = "TimedOut"
	// ConditionReasonRulesChanged: the group object holding the gang's rules appeared or changed.
	ConditionReasonRulesChanged = "RulesChanged"
	// ConditionReasonMemberArrived: a member the gang was waiting for was created.
	ConditionReasonMemberArrived = "MemberArrived"
	// ConditionReasonPlaceReserved: another member reserved a place for this one, which lockstep
	// had turned away while its gang could not be planned.
	ConditionReasonPlaceReserved = "PlaceReserved"
	// ConditionReasonQuorumFits: the gang's quorum fits free capacity, yet none of its members
	// has been back to filter for a while.
	ConditionReasonQuorumFits = "QuorumFits"
	// ConditionReasonReservationYielded: higher-priority work took the gang's reservation.
	ConditionReasonReservationYielded = "ReservationYielded"
	// ConditionReasonPreemptionRefused: an eviction the gang's preemption needed was refused.
	ConditionReasonPreemptionRefused = "PreemptionRefused"
	// ConditionReasonQueueChanged: the team queue the gang waits on was created, changed or
	// deleted.
	ConditionReasonQueueChanged = "QueueChanged"
)

// NVIDIA KAI Scheduler's pod keys (kai-scheduler/KAI-Scheduler v0.17, pkg/common/constants). KAI's
// podgrouper writes the annotation on every pod it gives a PodGroup; users write it on pods whose
// PodGroup they wrote themselves.
const (
	// AnnotationKAIPodGroup names the pod's PodGroup (scheduling.run.ai) in its namespace.
	AnnotationKAIPodGroup = "pod-group-name"
	// LabelKAISubGroup names the subgroup of its PodGroup the pod belongs to.
	LabelKAISubGroup = "kai.scheduler/subgroup-name"
	// LabelKAIQueue names the pod's KAI Queue; LabelKAIQueueLegacy is the key before KAI v0.6.
	LabelKAIQueue       = "kai.scheduler/queue"
	LabelKAIQueueLegacy = "runai/queue"
	// LabelKAINodePool, on a PodGroup, names the node pool KAI schedules it in ("default" without).
	LabelKAINodePool = "kai.scheduler/node-pool"
)

// Apache YuniKorn's pod keys (apache/yunikorn-k8shim, pkg/common/constants). YuniKorn has no group
// object: a gang is an application whose pods carry task groups.
const (
	// SchedulerNameYuniKorn is the schedulerName YuniKorn answers to; YuniKorn reads its legacy,
	// unprefixed keys only on such pods, and so does lockstep.
	SchedulerNameYuniKorn = "yunikorn"
	// The application id, in YuniKorn's order: the label, the annotation of the same key, then
	// the legacy label and Spark's own label.
	LabelYuniKornAppID       = "yunikorn.apache.org/app-id"
	AnnotationYuniKornAppID  = "yunikorn.apache.org/app-id"
	LabelYuniKornAppIDLegacy = "applicationId"
	LabelSparkAppSelector    = "spark-app-selector"
	// The queue, in YuniKorn's order: the label, the annotation of the same key, the legacy label.
	LabelYuniKornQueue       = "yunikorn.apache.org/queue"
	AnnotationYuniKornQueue  = "yunikorn.apache.org/queue"
	LabelYuniKornQueueLegacy = "queue"
	// AnnotationYuniKornTaskGroups is the application's task groups, a JSON list of {name,
	// minMember, minResource, ...}; AnnotationYuniKornTaskGroupName names the pod's.
	AnnotationYuniKornTaskGroups    = "yunikorn.apache.org/task-groups"
	AnnotationYuniKornTaskGroupName = "yunikorn.apache.org/task-group-name"
	// AnnotationYuniKornSchedulingPolicy holds "key=value" pairs separated by spaces:
	// placeholderTimeoutInSeconds and gangSchedulingStyle.
	AnnotationYuniKornSchedulingPolicy = "yunikorn.apache.org/schedulingPolicyParameters"
)

// Apache YuniKorn's queue configuration (yunikorn-k8shim pkg/common/constants and pkg/conf).
const (
	// The shim merges the data of two ConfigMaps of its own namespace, the second's keys winning;
	// the key queues.yaml holds the queues.
	ConfigMapYuniKornDefaults = "yunikorn-defaults"
	ConfigMapYuniKornConfigs  = "yunikorn-configs"
	YuniKornQueuesKey         = "queues.yaml"
	// NamespaceYuniKorn is the namespace YuniKorn's chart installs into, lockstep's default for
	// where to find those ConfigMaps.
	NamespaceYuniKorn = "yunikorn"
	// A Namespace's quota and guarantee, JSON resource lists, set the max and guaranteed of the
	// queue its applications are placed in when queues.yaml does not define that queue.
	AnnotationYuniKornNamespaceQuota      = "yunikorn.apache.org/namespace.quota"
	AnnotationYuniKornNamespaceGuaranteed = "yunikorn.apache.org/namespace.guaranteed"
)
