package nominate

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

func TestWriter(t *testing.T) {
	client := fake.NewClientset(builders.Pod("default", "w-1").Obj(), builders.Pod("default", "w-2").Obj())
	reg := prometheus.NewRegistry()
	w := New(client, 2, reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	nominatedNode := func(name string) func() string {
		return func() string {
			p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			return p.Status.NominatedNodeName
		}
	}
	eventually := func(get func() string, want string) {
		t.Helper()
		require.Eventually(t, func() bool { return get() == want }, 5*time.Second, 5*time.Millisecond, "want %q, have %q", want, get())
	}

	w.Nominate([]gang.Nomination{{Namespace: "default", Name: "w-1", Node: "n-1"}, {Namespace: "default", Name: "w-2", Node: "n-2"}})
	eventually(nominatedNode("w-1"), "n-1")
	eventually(nominatedNode("w-2"), "n-2")

	w.Nominate([]gang.Nomination{{Namespace: "default", Name: "w-1", Was: "n-1"}})
	eventually(nominatedNode("w-1"), "")
	require.Equal(t, "n-2", nominatedNode("w-2")())

	// A pod already gone is skipped, not retried.
	w.Nominate([]gang.Nomination{{Namespace: "default", Name: "gone", Node: "n-3"}})
	// A worker counts a write after the apiserver answered it, so after the pod shows it.
	counted := func(write, result string, want float64) {
		t.Helper()
		require.Eventually(t, func() bool { return testutil.ToFloat64(w.results.WithLabelValues(write, result)) == want },
			5*time.Second, 5*time.Millisecond, "%s %s: want %v", write, result, want)
	}
	counted("nominated", "skipped", 1)
	counted("nominated", "written", 2)
	counted("withdrawn", "written", 1)
}

// Writes for one pod queued before a worker takes them collapse into the latest: a pod nominated
// and withdrawn at once is never written.
func TestWriterKeepsTheLatestWrite(t *testing.T) {
	pod := builders.Pod("default", "w-1").Obj()
	pod.Status = corev1.PodStatus{}
	client := fake.NewClientset(pod)
	w := New(client, 1, nil)
	w.Nominate([]gang.Nomination{{Namespace: "default", Name: "w-1", Node: "n-1"}})
	w.Nominate([]gang.Nomination{{Namespace: "default", Name: "w-1", Node: "n-2"}})
	require.Equal(t, 1, w.queue.Len())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.True(t, w.next(ctx))
	p, err := client.CoreV1().Pods("default").Get(ctx, "w-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "n-2", p.Status.NominatedNodeName)
}
