package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/test/lib/faultproxy"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// These tests put faults between lockstep and kube-apiserver (test/lib/faultproxy) and show that
// a binding counts as done only when the apiserver said so: lockstep's metrics and /debug/gangs
// agree with the pods as the apiserver has them, no gang stays partial, and nothing stalls.

// addFault installs a rule on the proxy in front of lockstep for the rest of the test.
func (s *scenario) addFault(rule *faultproxy.Rule) *faultproxy.Rule {
	remove := env.faults.Add(rule)
	s.t.Cleanup(remove)
	return rule
}

// waitHits waits until the rule has taken n requests.
func (s *scenario) waitHits(rule *faultproxy.Rule, n int, timeout time.Duration) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	require.NoError(s.t, rule.WaitHits(ctx, n), "the fault to take %d requests (it took %d)", n, rule.Hits())
}

// lockstepBinds is what lockstep believes it bound, and failed to.
func lockstepBinds(t *testing.T) harness.BindCounts {
	t.Helper()
	c, err := env.lockstep.BindCounts(context.Background())
	require.NoError(t, err)
	return c
}

// requireNoFalseBinds checks that every binding lockstep counted since before is a pod the
// apiserver shows bound in the scenario. lockstep counts a binding once it is confirmed, which
// after a lost answer is a retry and a read later than the apiserver shows it, so the counts are
// given a few seconds to agree; lockstep counting more than the apiserver shows is a false bind
// at any moment.
func (s *scenario) requireNoFalseBinds(before harness.BindCounts) harness.BindCounts {
	s.t.Helper()
	var after harness.BindCounts
	bound := 0
	s.eventually(15*time.Second, "lockstep's bind count to match the pods bound", func() bool {
		after, bound = lockstepBinds(s.t), 0
		for _, p := range s.pods() {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		counted := after.Committed - before.Committed
		require.LessOrEqual(s.t, counted, bound, "false binds: lockstep counted %d bindings committed; the apiserver shows %d pods bound", counted, bound)
		return counted == bound
	})
	return after
}

// Throttling and apiserver errors on bindings, ordinary and gang: every pod ends bound, the gang
// is never partial beyond one commit, and lockstep counts exactly what the apiserver bound.
func TestBindsRetriedThroughThrottlingAndErrors(t *testing.T) {
	s := newScenario(t, 4, 4)
	before := lockstepBinds(t)
	// No Retry-After: client-go would retry those by itself, and lockstep's own retries are
	// what is on trial.
	var rules []*faultproxy.Rule
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests} {
		rules = append(rules, s.addFault(&faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, ""), Times: 3, Fault: faultproxy.Status(code, 0)}))
	}
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("plain-%d", i), gpus: 1}.pod())
	}
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("mpi-%d", i), gpus: 2, gang: "mpi", minAvailable: 4}.pod())
	}
	s.eventually(90*time.Second, "every pod bound", func() bool { return s.boundIn("plain") == 4 && s.boundIn("mpi") == 4 })
	for _, r := range rules {
		require.Equal(t, 3, r.Hits(), "every injected failure reached lockstep")
	}
	s.binds.assertNeverPartial(t, "mpi", 4)
	s.requireNoFalseBinds(before)
	s.eventually(10*time.Second, "/debug/gangs to show the commit", func() bool {
		c := s.gangs()["mpi"].LastCommit
		return c != nil && !c.Running && c.Bound == 4 && c.Failed == 0
	})
}

// A binding the apiserver applied but whose answer was lost is found bound on the retry, for an
// ordinary pod and for a gang member, instead of failing or being bound twice.
func TestLostBindingAnswers(t *testing.T) {
	s := newScenario(t, 2, 4)
	before := lockstepBinds(t)
	lostPlain := s.addFault(&faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, "plain"), Times: 1, Fault: faultproxy.LoseAnswer()})
	lostMember := s.addFault(&faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, "pair-1"), Times: 1, Fault: faultproxy.LoseAnswer()})

	s.create(podSpec{name: "plain", gpus: 1}.pod())
	s.create(podSpec{name: "pair-0", gpus: 2, gang: "pair", minAvailable: 2}.pod())
	s.create(podSpec{name: "pair-1", gpus: 2, gang: "pair", minAvailable: 2}.pod())
	s.eventually(60*time.Second, "every pod bound", func() bool { return s.boundIn("plain") == 1 && s.boundIn("pair") == 2 })
	// A lost answer's hit counts once the apiserver has answered, which can be just after the
	// pod shows bound: wait for it rather than read it at once.
	for _, lost := range []*faultproxy.Rule{lostPlain, lostMember} {
		waitCtx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		require.NoError(t, lost.WaitHits(waitCtx, 1))
		cancel()
		require.Equal(t, 1, lost.Hits())
	}
	s.binds.assertNeverPartial(t, "pair", 2)
	after := s.requireNoFalseBinds(before)
	require.Equal(t, before.Failed, after.Failed, "a lost answer is settled, not reported as a failure")
	s.eventually(10*time.Second, "/debug/gangs to show the gang bound", func() bool {
		g := s.gangs()["pair"]
		return g.Phase == views.PhaseBound && g.LastCommit != nil && g.LastCommit.Bound == 2
	})
	s.eventually(10*time.Second, "the GPU indices on the pod, written by the binding itself", func() bool {
		p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, "pair-1", metav1.GetOptions{})
		return err == nil && p.Annotations[wellknown.AnnotationGPUIDs] != ""
	})
}

// The load test's stall: the apiserver does not answer a binding before kube-scheduler gives up
// on the bind call (httpTimeout 30s). lockstep must report the binding failed and must not count
// the pod bound, so that the scheduler's retry binds it.
func TestBindingThatOutlivesTheSchedulersTimeout(t *testing.T) {
	s := newScenario(t, 1, 2)
	before := lockstepBinds(t)
	hold, release := faultproxy.Hold()
	t.Cleanup(release)
	held := &faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, "plain"), Fault: hold}
	remove := env.faults.Add(held)
	t.Cleanup(remove)

	s.create(podSpec{name: "plain", gpus: 2}.pod())
	// The first attempt is held until kube-scheduler gives up on the bind call (30s) and lockstep's
	// context ends with it; a second held attempt is the scheduler's retry, so by then lockstep
	// has answered the first call.
	s.waitHits(held, 2, 90*time.Second)
	s.eventually(20*time.Second, "lockstep to count the binding failed", func() bool {
		return lockstepBinds(t).Failed > before.Failed
	})
	require.Zero(t, s.boundIn("plain"), "held bindings never reached the apiserver")
	remove()
	release()

	s.eventually(90*time.Second, "the scheduler's retry to bind the pod", func() bool { return s.boundIn("plain") == 1 })
	s.requireNoFalseBinds(before)
}

// A member deleted while its gang commits stops its binding at once: the commit ends long before
// --commit-timeout, says so, and the gang completes when the member's controller recreates it.
func TestMemberDeletedDuringCommit(t *testing.T) {
	s := newScenario(t, 3, 2)
	hold, release := faultproxy.Hold()
	t.Cleanup(release)
	held := s.addFault(&faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, "trio-2"), Times: 1, Fault: hold})
	for i := range 3 {
		s.create(podSpec{name: fmt.Sprintf("trio-%d", i), gpus: 2, gang: "trio", minAvailable: 3}.pod())
	}
	s.waitHits(held, 1, 60*time.Second)
	s.eventually(20*time.Second, "the two others bound", func() bool { return s.boundIn("trio") == 2 })

	s.deletePod("trio-2")
	deleted := time.Now()
	s.eventually(10*time.Second, "the commit to end with trio-2 failed", func() bool {
		c := s.gangs()["trio"].LastCommit
		return c != nil && !c.Running && c.Failed == 1
	})
	require.Less(t, time.Since(deleted), 15*time.Second, "the commit stopped well within --commit-timeout (30s)")
	c := s.gangs()["trio"].LastCommit
	require.True(t, c.StillPartial, "the gang is reported partial: %+v", c)

	s.create(podSpec{name: "trio-2", gpus: 2, gang: "trio", minAvailable: 3}.pod())
	s.eventually(60*time.Second, "the recreated member to complete the gang", func() bool { return s.boundIn("trio") == 3 })
	s.eventually(10*time.Second, "the gang Bound", func() bool { return s.gangs()["trio"].Phase == views.PhaseBound })
}

// A pod bound by someone else while lockstep's binding is on its way: lockstep's binding fails
// for good (no retries spent on it) and lockstep's record follows the apiserver.
func TestPodBoundElsewhereMeanwhile(t *testing.T) {
	s := newScenario(t, 2, 2)
	before := lockstepBinds(t)
	hold, release := faultproxy.Hold()
	t.Cleanup(release)
	held := s.addFault(&faultproxy.Rule{Match: faultproxy.BindingOf(s.ns, "plain"), Times: 1, Fault: hold})
	// The scheduler may only choose nodes[0]; "someone else" binds the pod to nodes[1].
	s.create(podSpec{name: "plain", gpus: 2, nodeSelector: map[string]string{"kubernetes.io/hostname": s.nodes[0]}}.pod())
	s.waitHits(held, 1, 60*time.Second)

	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, env.client.CoreV1().Pods(s.ns).Bind(s.ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: s.nodes[1]},
	}, metav1.CreateOptions{}))
	release()

	s.eventually(20*time.Second, "lockstep to count its binding failed", func() bool {
		return lockstepBinds(t).Failed > before.Failed
	})
	p, err = env.client.CoreV1().Pods(s.ns).Get(s.ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, s.nodes[1], p.Spec.NodeName)
	// lockstep counts the pod's GPUs where the apiserver has it, and gave back the ones it chose
	// on nodes[0]: a 2-GPU pod fits there and nowhere else.
	s.create(podSpec{name: "next", gpus: 2}.pod())
	s.eventually(60*time.Second, "the next pod bound on the free node", func() bool {
		n, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, "next", metav1.GetOptions{})
		return err == nil && n.Spec.NodeName == s.nodes[0]
	})
}

// The shipped FlowSchema puts lockstep's pod reads and bindings at kube-scheduler's priority
// level: the apiserver names the FlowSchema that matched each request in a response header.
func TestBindingsShareTheSchedulersPriorityLevel(t *testing.T) {
	s := newScenario(t, 1, 1)
	expiry := int64(600)
	tok, err := env.client.CoreV1().ServiceAccounts("lockstep-system").CreateToken(s.ctx, "lockstep",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.AnonymousClientConfig(env.cluster.RESTConfig)
	cfg.BearerToken = tok.Status.Token
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	fs, err := env.client.FlowcontrolV1().FlowSchemas().Get(s.ctx, "lockstep-bindings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "workload-high", fs.Spec.PriorityLevelConfiguration.Name)

	flowSchemaOf := func(method, path string) string {
		req, err := http.NewRequestWithContext(s.ctx, method, cfg.Host+path, strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
	}
	s.create(podSpec{name: "plain", affinity: unplaceable}.pod())
	require.Equal(t, string(fs.UID), flowSchemaOf(http.MethodGet, "/api/v1/namespaces/"+s.ns+"/pods/plain"), "a pod read")
	require.Equal(t, string(fs.UID), flowSchemaOf(http.MethodPost, "/api/v1/namespaces/"+s.ns+"/pods/plain/binding"), "a binding (this one malformed, refused after matching)")
	require.NotEqual(t, string(fs.UID), flowSchemaOf(http.MethodGet, "/api/v1/namespaces/"+s.ns+"/pods"), "lists stay where they were")
}
