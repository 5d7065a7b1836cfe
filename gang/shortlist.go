package gang

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/placement"
)

// The shortlist: filter passes an ordinary GPU pod only the nodes lockstep would place it on.
//
// Scores are added: the scheduler sums its plugins' scores and lockstep's, and lockstep's packing
// usually outweighs the plugins' spreading, but not always, and the scheduler spends a fifth of
// its CPU per pod scoring every feasible node and sending them all to prioritize for a choice
// lockstep has in effect already made. Passing only the nodes lockstep ranks best (all of them
// when they tie, for the scheduler's scores to choose among) makes packing the rule instead of the
// usual outcome, and when one node is left the scheduler skips scoring and prioritize altogether.
//
// Only pods that ask nothing of the scheduler's scores are shortlisted: a pod with preferred node
// or pod (anti-)affinity or a ScheduleAnyway spread constraint keeps every node it fits, and so
// does a pod of a ReplicaSet, StatefulSet or ReplicationController, which the scheduler spreads by
// default. PreferNoSchedule taints rank above packing, as they do in the scheduler.

// shortlistable says whether a pod leaves the choice among the nodes it fits to lockstep.
func shortlistable(pod *corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
		if a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			return false
		}
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		switch owner.Kind {
		case "ReplicaSet", "StatefulSet", "ReplicationController":
			return false
		}
	}
	return true
}

// shortlister narrows filter's passing nodes for an ordinary pod asking for gpus to the best
// ranked: the fewest PreferNoSchedule taints it does not tolerate, then the best GPU score
// outside the capacity held for others. Filter's loop shows it each passing node (see), while the
// node is at hand; narrow then lists those of the best rank. Failed nodes keep their reasons; the
// nodes left off are not listed as failed, since the pod is schedulable and a list of them would
// be all the scheduler decodes.
type shortlister struct {
	gpus        int64
	tolerations []corev1.Toleration
	memo        scoreMemo
	best        shortlistRank
	count       int
	// at are the offered positions of the first nodes of the best rank so far. A few nodes
	// usually rank best, and then narrow needs no second look at every node; on a cluster of
	// identical idle nodes every node ties, and nothing is narrowed.
	at [64]int32
}

func (s *shortlister) rank(n *nodeInfo, held int64) shortlistRank {
	return shortlistRank{untoleratedSoftTaints(n.softTaints, s.tolerations), s.memo.gpuScore(n, s.gpus, held)}
}

// see ranks the passing node offered at position i.
func (s *shortlister) see(i int, n *nodeInfo, held int64) {
	switch r := s.rank(n, held); {
	case s.count == 0 || r.better(s.best):
		s.best, s.count = r, 0
		fallthrough
	case r == s.best:
		if s.count < len(s.at) {
			s.at[s.count] = int32(i)
		}
		s.count++
	}
}

func (s *shortlister) narrow(out FilterResult, offered []string, nodes map[string]*nodeInfo, held map[string]placement.Resources, mt *Metrics) FilterResult {
	passing := out.Passing(offered)
	if s.count == len(passing) {
		return out
	}
	keep := make([]string, 0, s.count)
	if s.count <= len(s.at) {
		for _, i := range s.at[:s.count] {
			keep = append(keep, offered[i])
		}
	} else {
		for _, name := range passing {
			if s.rank(nodes[name], held[name].GPU) == s.best {
				keep = append(keep, name)
			}
		}
	}
	mt.observeShortlist()
	return FilterResult{Feasible: keep, Failed: out.Failed, Resolvable: out.Resolvable}
}

type shortlistRank struct {
	taints int
	score  int
}

func (r shortlistRank) better(than shortlistRank) bool {
	if r.taints != than.taints {
		return r.taints < than.taints
	}
	return r.score > than.score
}

// untoleratedSoftTaints counts what the scheduler's TaintToleration scores a node by.
func untoleratedSoftTaints(taints []corev1.Taint, tolerations []corev1.Toleration) int {
	count := 0
	for i := range taints {
		tolerated := false
		for j := range tolerations {
			// Comparison operators are behind a scheduler feature gate that is off by default.
			if tolerations[j].ToleratesTaint(klog.Background(), &taints[i], false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			count++
		}
	}
	return count
}
