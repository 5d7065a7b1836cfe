// Package dialect reads the ways users of other gang schedulers already write gangs, so that their
// jobs schedule all-or-nothing under lockstep without an edit: Koordinator's annotations and
// PodGroups, the lightweight labels Alibaba ACK's Arena writes, scheduler-plugins' coscheduling
// PodGroups (Kubeflow's training-operator and MPI operator), Volcano's and kube-batch's PodGroups,
// Kueue's plain pod groups and the Workloads it admits jobs as, Kubernetes' own PodGroup
// (scheduling.k8s.io/v1alpha2, named by a pod's spec.schedulingGroup), NVIDIA KAI Scheduler's
// PodGroups (scheduling.run.ai) and Apache YuniKorn's task groups (pod annotations, no object). It
// reads their team queues too: Volcano's and kube-batch's Queues
// and scheduler-plugins' and Koordinator's ElasticQuotas (and Koordinator's pod quota label).
//
// It owns the translation only: pod markers to a gangspec.Membership (Pods), group objects to a
// gangspec.Spec (API.Parse, and Choose where objects share a name), queue objects to a
// quota.Queue (QueueAPI.Parse, and ChooseQueue and AloneInNamespace where objects collide), and
// which APIs exist (APIs, QueueAPIs). It holds no state and talks to no apiserver; packages
// podgroup and tenancy watch the objects and write their status, and package gang never learns
// which ecosystem a spec or a queue came from. docs/dialects.md is the reference
// for users: every key, the precedence between dialects, and what each field does.
package dialect
