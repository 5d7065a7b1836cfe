package extender

import (
	"net/http"

	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// preempt answers the scheduler's preempt verb. Once its DefaultPreemption has chosen candidate
// nodes and the pods it would evict on each, the scheduler sends them here and goes ahead only on
// the nodes in the answer, with the victims the answer names. lockstep keeps a node, its victims
// as they came, or drops it; it never names victims of its own. The scheduler sends the victims as
// UIDs when it is nodeCacheCapable and as whole pods otherwise, and reads UIDs back either way.
func (s *server) preempt(w http.ResponseWriter, r *http.Request) int {
	var args extenderv1.ExtenderPreemptionArgs
	if code := s.decode(w, r, &args, "ExtenderPreemptionArgs"); code != 0 {
		return code
	}
	if args.Pod == nil {
		return writeError(w, http.StatusBadRequest, "ExtenderPreemptionArgs.Pod is missing")
	}
	candidates := metaVictimsOf(&args)
	result := s.sched.Preempt(args.Pod, victimUIDs(candidates))
	kept := make(map[string]*extenderv1.MetaVictims, len(result.Kept))
	for _, node := range result.Kept {
		kept[node] = candidates[node]
	}
	return writeJSON(w, http.StatusOK, &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: kept})
}

// metaVictimsOf is the candidates as UIDs, the form the answer takes: as sent when the scheduler
// sent UIDs, else converted from the pods the way the scheduler converts them
// (convertToMetaVictims), PDB violations kept.
func metaVictimsOf(args *extenderv1.ExtenderPreemptionArgs) map[string]*extenderv1.MetaVictims {
	if args.NodeNameToMetaVictims != nil || args.NodeNameToVictims == nil {
		return args.NodeNameToMetaVictims
	}
	out := make(map[string]*extenderv1.MetaVictims, len(args.NodeNameToVictims))
	for node, victims := range args.NodeNameToVictims {
		meta := &extenderv1.MetaVictims{Pods: []*extenderv1.MetaPod{}}
		if victims != nil {
			meta.NumPDBViolations = victims.NumPDBViolations
			for _, pod := range victims.Pods {
				if pod != nil {
					meta.Pods = append(meta.Pods, &extenderv1.MetaPod{UID: string(pod.UID)})
				}
			}
		}
		out[node] = meta
	}
	return out
}

// victimUIDs is what the manager is asked about: each candidate node's victims by UID.
func victimUIDs(candidates map[string]*extenderv1.MetaVictims) map[string][]types.UID {
	out := make(map[string][]types.UID, len(candidates))
	for node, victims := range candidates {
		var uids []types.UID
		if victims != nil {
			for _, pod := range victims.Pods {
				if pod != nil {
					uids = append(uids, types.UID(pod.UID))
				}
			}
		}
		out[node] = uids
	}
	return out
}
