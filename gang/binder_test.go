package gang

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// bindingAPI stands in for kube-apiserver's pods/binding: it applies a Binding to the stored pod
// as BindingREST does (uid precondition, conflict once assigned, the Binding's annotations copied
// onto the pod) with faults in front, one per request, in order.
type bindingAPI struct {
	t      *testing.T
	client *fake.Clientset
	mu     sync.Mutex
	faults []bindFault
	posts  int
}

// bindFault is what happens to one binding request. before runs first (a test's way to cancel
// the caller's context, delete the pod or bind it elsewhere meanwhile); then the request is
// refused with refuse without being applied, or applied and its answer replaced by lose.
type bindFault struct {
	before func()
	refuse error
	lose   error
}

func newBindingAPI(t *testing.T, pods ...runtime.Object) *bindingAPI {
	api := &bindingAPI{t: t, client: fake.NewClientset(pods...)}
	api.client.PrependReactor("create", "pods/binding", api.react)
	return api
}

func (a *bindingAPI) react(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	a.posts++
	var f bindFault
	if len(a.faults) > 0 {
		f, a.faults = a.faults[0], a.faults[1:]
	}
	a.mu.Unlock()
	if f.before != nil {
		f.before()
	}
	if f.refuse != nil {
		return true, nil, f.refuse
	}
	if err := a.apply(action.(k8stesting.CreateAction).GetObject().(*corev1.Binding)); err != nil {
		return true, nil, err
	}
	return true, nil, f.lose
}

func (a *bindingAPI) apply(b *corev1.Binding) error {
	obj, err := a.client.Tracker().Get(podsGVR, b.Namespace, b.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	switch {
	case b.UID != "" && pod.UID != b.UID:
		return apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", b.UID, pod.UID))
	case pod.DeletionTimestamp != nil:
		return apierrors.NewInternalError(fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", b.Name))
	case pod.Spec.NodeName != "":
		return apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
	}
	pod.Spec.NodeName = b.Target.Name
	for k, v := range b.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	return a.client.Tracker().Update(podsGVR, pod, pod.Namespace)
}

func (a *bindingAPI) pod(name string) *corev1.Pod {
	obj, err := a.client.Tracker().Get(podsGVR, "default", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(a.t, err)
	return obj.(*corev1.Pod)
}

func (a *bindingAPI) writes() (posts, others int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, act := range a.client.Actions() {
		if act.GetVerb() != "get" && act.GetVerb() != "list" && act.GetVerb() != "watch" && act.GetSubresource() != "binding" {
			others++
		}
	}
	return a.posts, others
}

func TestAPIBinder(t *testing.T) {
	gr := podsGVR.GroupResource()
	throttled := apierrors.NewTooManyRequests("slow down", 0)
	unavailable := apierrors.NewServiceUnavailable("apiserver is shutting down")
	connReset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}

	tests := []struct {
		name string
		// faults get the test's pod uid, its cancel for the caller's context, and the API.
		faults      func(api *bindingAPI, cancel context.CancelFunc) []bindFault
		wantBound   bool // the outcome the apiserver shows afterwards, and so the one Bind must report
		wantErr     error
		wantErrText string
		wantPosts   int
	}{
		{
			name:      "bound by one write carrying the GPU indices",
			wantBound: true, wantPosts: 1,
		},
		{
			name: "throttled and unavailable, then bound",
			faults: func(*bindingAPI, context.CancelFunc) []bindFault {
				return []bindFault{{refuse: throttled}, {refuse: unavailable}, {refuse: apierrors.NewInternalError(errors.New("etcd leader changed"))}}
			},
			wantBound: true, wantPosts: 4,
		},
		{
			name: "answer lost after the binding landed: the retry's conflict is settled by a read",
			faults: func(*bindingAPI, context.CancelFunc) []bindFault {
				return []bindFault{{lose: connReset}}
			},
			wantBound: true, wantPosts: 2,
		},
		{
			name: "answer lost and the scheduler gave up meanwhile: a read with its own deadline confirms",
			faults: func(_ *bindingAPI, cancel context.CancelFunc) []bindFault {
				return []bindFault{{before: cancel, lose: fmt.Errorf("http2: stream closed: %w", context.Canceled)}}
			},
			wantBound: true, wantPosts: 1,
		},
		{
			name: "context ended before the request was sent: an error, never a false success",
			faults: func(_ *bindingAPI, cancel context.CancelFunc) []bindFault {
				return []bindFault{{before: cancel, refuse: fmt.Errorf("client rate limiter Wait returned an error: %w", context.Canceled)}}
			},
			wantBound: false, wantErr: context.Canceled, wantPosts: 1,
		},
		{
			name: "throttled until the caller's deadline: an error naming the attempts",
			faults: func(*bindingAPI, context.CancelFunc) []bindFault {
				f := make([]bindFault, 1000)
				for i := range f {
					f[i].refuse = throttled
				}
				return f
			},
			wantBound: false, wantErrText: "attempts",
		},
		{
			name: "pod deleted meanwhile: stops at once",
			faults: func(api *bindingAPI, _ context.CancelFunc) []bindFault {
				return []bindFault{{before: func() { require.NoError(t, api.client.Tracker().Delete(podsGVR, "default", "w-0")) }}}
			},
			wantErr: ErrPodGone, wantPosts: 1,
		},
		{
			name: "pod recreated under the same name: the uid precondition refuses it",
			faults: func(api *bindingAPI, _ context.CancelFunc) []bindFault {
				return []bindFault{{before: func() {
					require.NoError(t, api.client.Tracker().Delete(podsGVR, "default", "w-0"))
					require.NoError(t, api.client.Tracker().Add(builders.Pod("default", "w-0").UID("other").Obj()))
				}}}
			},
			wantErr: ErrPodGone, wantPosts: 1,
		},
		{
			name: "pod being deleted: the apiserver's internal error is read as gone",
			faults: func(api *bindingAPI, _ context.CancelFunc) []bindFault {
				return []bindFault{{before: func() {
					pod := api.pod("w-0").DeepCopy()
					pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
					require.NoError(t, api.client.Tracker().Update(podsGVR, pod, "default"))
				}}}
			},
			wantErr: ErrPodGone, wantPosts: 1,
		},
		{
			name: "bound to another node by someone else meanwhile",
			faults: func(api *bindingAPI, _ context.CancelFunc) []bindFault {
				return []bindFault{{before: func() {
					pod := api.pod("w-0").DeepCopy()
					pod.Spec.NodeName = "n-other"
					require.NoError(t, api.client.Tracker().Update(podsGVR, pod, "default"))
				}}}
			},
			wantErr: ErrBoundElsewhere, wantPosts: 1,
		},
		{
			name: "a not-found answer is the pod gone",
			faults: func(*bindingAPI, context.CancelFunc) []bindFault {
				return []bindFault{{refuse: apierrors.NewNotFound(gr, "w-0")}}
			},
			wantErr: ErrPodGone, wantPosts: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := builders.Pod("default", "w-0").UID("uid-w-0").GPU(2).Obj()
			api := newBindingAPI(t, pod)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if tc.faults != nil {
				api.faults = tc.faults(api, cancel)
			}
			b := NewAPIBinder(api.client)
			b.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 20 * time.Millisecond}

			err := b.Bind(ctx, "default", "w-0", pod.UID, "n-0", []int{2, 3})

			after := api.pod("w-0")
			bound := after != nil && after.UID == pod.UID && after.Spec.NodeName == "n-0"
			require.Equal(t, tc.wantBound, bound, "the pod as the apiserver has it: %+v", after)
			if tc.wantBound {
				require.NoError(t, err, "the apiserver bound the pod; Bind must say so")
				require.Equal(t, "2,3", after.Annotations[wellknown.AnnotationGPUIDs], "the GPU indices ride on the binding")
			} else {
				require.Error(t, err, "the pod is not bound; Bind must not report success")
			}
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			if tc.wantErrText != "" {
				require.ErrorContains(t, err, tc.wantErrText)
			}
			posts, others := api.writes()
			if tc.wantPosts > 0 {
				require.Equal(t, tc.wantPosts, posts, "binding requests")
			}
			require.Zero(t, others, "a binding is one write: no PATCH or other write beside it")
		})
	}
}

// A slow apiserver must not hold one attempt for the caller's whole deadline: the attempt is cut
// off and sent again, and a landed first attempt is then found by the retry's conflict.
func TestAPIBinderAttemptTimeout(t *testing.T) {
	pod := builders.Pod("default", "w-0").UID("uid-w-0").Obj()
	api := newBindingAPI(t, pod)
	var calls int
	var mu sync.Mutex
	api.client.PrependReactor("create", "pods/binding", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			// The fake client ignores contexts; answer as client-go does when the attempt's own
			// deadline cuts the request off after the apiserver applied it.
			require.NoError(t, api.apply(&corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w-0", UID: pod.UID}, Target: corev1.ObjectReference{Name: "n-0"}}))
			return true, nil, fmt.Errorf("Post \"https://apiserver/api/v1/namespaces/default/pods/w-0/binding\": %w", context.DeadlineExceeded)
		}
		return false, nil, nil
	})
	b := NewAPIBinder(api.client)
	b.Backoff = wait.Backoff{Duration: time.Millisecond, Steps: 1 << 30}
	require.NoError(t, b.Bind(context.Background(), "default", "w-0", types.UID("uid-w-0"), "n-0", nil))
	require.Equal(t, 2, calls)
}

// Bindings beyond the in-flight cap wait their turn in lockstep, not inside the apiserver, and
// one whose caller gives up while waiting was never sent: it fails without a read to settle it.
func TestAPIBinderCapsBindingsInFlight(t *testing.T) {
	pods := []runtime.Object{
		builders.Pod("default", "a").UID("uid-a").Obj(),
		builders.Pod("default", "b").UID("uid-b").Obj(),
		builders.Pod("default", "c").UID("uid-c").Obj(),
	}
	api := newBindingAPI(t, pods...)
	entered, release := make(chan string, 3), make(chan struct{})
	api.client.PrependReactor("create", "pods/binding", func(action k8stesting.Action) (bool, runtime.Object, error) {
		entered <- action.(k8stesting.CreateAction).GetObject().(*corev1.Binding).Name
		<-release
		return false, nil, nil
	})
	b := NewAPIBinder(api.client)
	b.inFlight = make(chan struct{}, 1)

	first := make(chan error, 1)
	go func() { first <- b.Bind(context.Background(), "default", "a", "uid-a", "n-0", nil) }()
	require.Equal(t, "a", recv(t, entered, "the first binding reaches the apiserver"))

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() { second <- b.Bind(ctx, "default", "b", "uid-b", "n-0", nil) }()
	third := make(chan error, 1)
	go func() { third <- b.Bind(context.Background(), "default", "c", "uid-c", "n-0", nil) }()
	requireNoValue(t, entered, "a binding beyond the cap")
	cancel()
	err := recv(t, second, "the binding whose caller gave up")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errNotSent)

	close(release)
	require.NoError(t, recv(t, first, "first binding"))
	require.Equal(t, "c", recv(t, entered, "the waiting binding goes once the first is answered"))
	require.NoError(t, recv(t, third, "third binding"))
	for _, act := range api.client.Actions() {
		if get, ok := act.(k8stesting.GetAction); ok {
			require.NotEqual(t, "b", get.GetName(), "a binding never sent needs no read")
		}
	}
}
