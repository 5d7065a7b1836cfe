package harness

import (
	"fmt"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// WorkloadAPI is how one Kubernetes release serves its own gang API (Workload and PodGroup):
// which version, behind which switches. The API moved from alpha (1.36, v1alpha2) to beta (1.37,
// v1beta1); both stay off until turned on, and 1.37 folded the scheduler's GangScheduling gate into
// GenericWorkload (pkg/features/kube_features.go of each release).
type WorkloadAPI struct {
	// Version is the scheduling.k8s.io version served.
	Version string
	// APIServerGates and RuntimeConfig serve it from kube-apiserver.
	APIServerGates, RuntimeConfig string
	// ControllerManagerGates let the Job controller make a Workload and PodGroup for an Indexed Job.
	ControllerManagerGates string
	// SchedulerGates turn on kube-scheduler's own gang scheduling: its pod-group cycle and its
	// GangScheduling plugin (which the shipped configurations disable).
	SchedulerGates string
	// Composite: CompositePodGroup (scheduling.k8s.io/v1alpha3) is served too.
	Composite bool
}

// WorkloadAPIOf is the release's gang API, or an error naming the release when it serves none
// that lockstep reads (1.35's v1alpha1 and anything older).
func WorkloadAPIOf(r cluster.Release) (WorkloadAPI, error) {
	switch {
	case r.AtLeast(37):
		// CompositePodGroup (v1alpha3) too, alpha, and the topology constraints it needs: without
		// TopologyAwareWorkloadScheduling the apiserver drops a PodGroup's schedulingConstraints,
		// and without WorkloadWithJob a Job's spec.scheduling.
		return WorkloadAPI{Version: "v1beta1", Composite: true,
			APIServerGates:         "GenericWorkload=true,WorkloadWithJob=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
			RuntimeConfig:          "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
			ControllerManagerGates: "GenericWorkload=true,WorkloadWithJob=true", SchedulerGates: "GenericWorkload=true"}, nil
	case r.AtLeast(36):
		return WorkloadAPI{Version: "v1alpha2", APIServerGates: "GenericWorkload=true", RuntimeConfig: "scheduling.k8s.io/v1alpha2=true",
			ControllerManagerGates: "GenericWorkload=true,WorkloadWithJob=true", SchedulerGates: "GenericWorkload=true,GangScheduling=true"}, nil
	}
	return WorkloadAPI{}, fmt.Errorf("Kubernetes %s serves no PodGroup API lockstep reads: 1.36 serves scheduling.k8s.io/v1alpha2 and 1.37 v1beta1", r)
}
