package inspect

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// lockstepPod is a pod as the chart makes it: the label, a lockstep container with its args.
func lockstepPod(namespace, name string, phase corev1.PodPhase, isReady bool, args ...string) *corev1.Pod {
	status := corev1.ConditionFalse
	if isReady {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "lockstep"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-scheduler"},
			{Name: "lockstep", Args: args},
		}},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestFinderFind(t *testing.T) {
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "lockstep-system", Name: "agent-x",
		Labels: map[string]string{"app.kubernetes.io/part-of": "lockstep"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpu-agent"}}}}
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "lockstep-system", Name: "lockstep"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	leaseArg := "--leader-election-lease=lockstep-system/lockstep"
	for _, tc := range []struct {
		name     string
		objects  []runtime.Object
		finder   Finder
		wantPod  string
		wantPort int
		wantErr  string
	}{{
		name:     "the ready pod over a pending one, and the gpu-agent never",
		objects:  []runtime.Object{agent, lockstepPod("lockstep-system", "a", corev1.PodPending, false), lockstepPod("lockstep-system", "b", corev1.PodRunning, true, "--debug-listen=127.0.0.1:9999")},
		wantPod:  "lockstep-system/b",
		wantPort: 9999,
	}, {
		name: "the leader among ready pods",
		objects: []runtime.Object{lease("b_4f1c"),
			lockstepPod("lockstep-system", "a", corev1.PodRunning, true, leaseArg), lockstepPod("lockstep-system", "b", corev1.PodRunning, true, leaseArg)},
		wantPod:  "lockstep-system/b",
		wantPort: DefaultDebugPort,
	}, {
		name:     "the flag's port wins",
		objects:  []runtime.Object{lockstepPod("lockstep-system", "a", corev1.PodRunning, true, "--debug-listen", "127.0.0.1:9999")},
		finder:   Finder{Port: 7000},
		wantPod:  "lockstep-system/a",
		wantPort: 7000,
	}, {
		name:    "debug address off",
		objects: []runtime.Object{lockstepPod("lockstep-system", "a", corev1.PodRunning, true, "--debug-listen=")},
		wantErr: "lockstep pod lockstep-system/a: container lockstep runs with --debug-listen empty, which turns the debug address off",
	}, {
		name:    "not installed, looking everywhere",
		objects: []runtime.Object{agent},
		wantErr: `lockstep is not installed or not found: no pod labelled app.kubernetes.io/part-of=lockstep with a container named "lockstep" in any namespace (1 labelled pods have no such container)`,
	}, {
		name:    "not installed in the namespace named",
		objects: []runtime.Object{lockstepPod("lockstep-system", "a", corev1.PodRunning, true)},
		finder:  Finder{Namespace: "elsewhere"},
		wantErr: `no pod labelled app.kubernetes.io/part-of=lockstep with a container named "lockstep" in namespace elsewhere; install it`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.finder
			f.Client = fake.NewSimpleClientset(tc.objects...)
			got, err := f.Find(context.Background())
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantPod, got.Name())
			assert.Equal(t, tc.wantPort, got.Port)
		})
	}
}

func TestDialError(t *testing.T) {
	target := Target{Pod: lockstepPod("lockstep-system", "a", corev1.PodRunning, true), Port: 8889}
	target.Pod.Spec.NodeName = "cp-0"
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, "a", errors.New(`User "alice" cannot create resource "pods/portforward"`))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"403 over websockets", &streamhttp.UpgradeFailureError{Cause: forbidden}, "RBAC forbids it (403): you need create and get on pods/portforward in namespace lockstep-system"},
		{"403 over SPDY, in words", fmt.Errorf("unable to upgrade connection: %s", forbidden.Error()), "RBAC forbids it (403)"},
		{"the kubelet out of reach", errors.New("error dialing backend: dial tcp 10.0.0.5:10250: connect: connection refused"), "the apiserver could not reach the kubelet of node cp-0"},
		{"the pod gone", &streamhttp.UpgradeFailureError{Cause: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")}, "the pod is gone (404)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dialError(target, tc.err)
			assert.Contains(t, err.Error(), "cannot reach lockstep in pod lockstep-system/a (port 8889): "+tc.want)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

func TestShouldFallBack(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, "a", errors.New("no"))
	assert.False(t, shouldFallBack(&streamhttp.UpgradeFailureError{Cause: forbidden}), "a refusal is the answer, not a want of WebSockets")
	assert.True(t, shouldFallBack(&streamhttp.UpgradeFailureError{Cause: errors.New("bad handshake")}))
	assert.True(t, shouldFallBack(&streamhttp.UpgradeFailureError{Cause: apierrors.NewBadRequest("upgrade request required")}))
}

func TestOpenRefusesAPodThatDoesNotRun(t *testing.T) {
	_, err := Open(nil, Target{Pod: lockstepPod("lockstep-system", "a", corev1.PodPending, false), Port: 8889})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach lockstep in pod lockstep-system/a (port 8889): the pod is not running: its phase is Pending")
}
