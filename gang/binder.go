package gang

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Errors APIBinder wraps, at once and without retrying, when the apiserver proved that a binding
// can never succeed: retries would spend the commit's time and the client's rate limit for nothing.
var (
	// ErrPodGone: the pod was deleted, is being deleted, or was recreated under a new uid.
	ErrPodGone = errors.New("pod is gone")
	// ErrBoundElsewhere: someone else bound the pod to another node first.
	ErrBoundElsewhere = errors.New("pod is bound to another node")
)

// errNotSent: the caller's context ended while earlier bindings were on their way, so this one
// never left lockstep and needs no read to settle it.
var errNotSent = errors.New("the binding waited for its turn and was not sent")

// APIBinder posts pods/binding through client-go. It reports success only when the apiserver
// confirmed the pod bound to the node: by answering the binding itself, or, when an answer was
// lost, by showing the pod on that node in a read afterwards.
type APIBinder struct {
	Client kubernetes.Interface
	// Backoff spaces retries of transient failures; its Cap bounds one pause. The caller's
	// context, not a count of steps, bounds how long the retries go on.
	Backoff wait.Backoff
	// AttemptTimeout bounds one request, so that a request the apiserver never answers is sent
	// again (and, if it landed meanwhile, found bound) instead of using up the caller's deadline.
	// It is long on purpose: an overloaded apiserver answers late, and sending again a binding it
	// is still working on doubles its load just when it can least take it.
	AttemptTimeout time.Duration
	// inFlight caps the binding requests on their way at once, across every commit and ordinary
	// bind. Hundreds of gangs can reach quorum within a second; sent all at once, their bindings
	// queue inside the apiserver, each waits behind all the others, and every gang stays partly
	// bound for as long. Waiting here instead, in arrival order, lets each gang's bindings go out
	// together. nil means no cap.
	inFlight chan struct{}
	// ConfirmTimeout bounds the read that settles an unknown outcome after the caller's context
	// ended: the scheduler may have given up on the call, but lockstep's own record of the pod
	// must still follow what the apiserver did.
	ConfirmTimeout time.Duration
}

// DefaultBindsInFlight is how many binding requests lockstep has on their way at once. A binding
// costs the apiserver a few milliseconds, so 32 at a time is thousands a second, far above
// --bind-qps, on a healthy control plane; on a loaded one it keeps the queue on lockstep's side.
const DefaultBindsInFlight = 32

// NewAPIBinder retries quickly at first (most failures are a moment's throttling or an etcd
// leader change) and at most once a second after that.
func NewAPIBinder(client kubernetes.Interface) *APIBinder {
	return &APIBinder{
		Client:         client,
		Backoff:        wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: time.Second},
		AttemptTimeout: 15 * time.Second,
		ConfirmTimeout: 5 * time.Second,
		inFlight:       make(chan struct{}, DefaultBindsInFlight),
	}
}

// Bind binds the pod in one write: the GPU indices ride on the Binding's annotations, which the
// apiserver copies onto the pod as it sets spec.nodeName. The Binding's uid is a precondition, so
// a pod recreated under the same name is never bound in its predecessor's place.
func (b *APIBinder) Bind(ctx context.Context, namespace, name string, uid types.UID, node string, gpuIDs []int) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if len(gpuIDs) > 0 {
		binding.Annotations = map[string]string{wellknown.AnnotationGPUIDs: FormatGPUIDs(gpuIDs)}
	}
	target := podTarget{namespace: namespace, name: name, uid: uid, node: node}
	backoff := b.Backoff
	var lastErr error
	attempts, mayHaveLanded := 0, false
	for {
		attempts++
		err := b.post(ctx, binding)
		if err == nil {
			return nil
		}
		lastErr = err
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: pod %s was deleted: %w", ErrPodGone, target, err)
		}
		if needsRead(err) {
			if done, err := b.settle(ctx, target, err); done {
				return err
			}
		}
		mayHaveLanded = mayHaveLanded || answerMayBeLost(err)
		if !transient(err) || ctx.Err() != nil || !pause(ctx, backoff.Step()) {
			break
		}
	}
	if attempts > 1 {
		lastErr = fmt.Errorf("after %d attempts: %w", attempts, lastErr)
	}
	if mayHaveLanded {
		return b.confirmAfter(target, lastErr)
	}
	return lastErr
}

func (b *APIBinder) post(ctx context.Context, binding *corev1.Binding) error {
	if b.inFlight != nil {
		select {
		case b.inFlight <- struct{}{}:
			defer func() { <-b.inFlight }()
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errNotSent, ctx.Err())
		}
	}
	if b.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.AttemptTimeout)
		defer cancel()
	}
	return b.Client.CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
}

// podTarget is the pod a binding is for and the node it should end on.
type podTarget struct {
	namespace, name string
	uid             types.UID
	node            string
}

func (t podTarget) String() string { return t.namespace + "/" + t.name }

// settle reads the pod after an answer that does not say by itself what happened (a conflict,
// an internal error). done is false when the read leaves the binding worth another try, or could
// not be made.
func (b *APIBinder) settle(ctx context.Context, t podTarget, cause error) (done bool, err error) {
	done, err, _ = b.readOutcome(ctx, t, cause)
	return done, err
}

// confirmAfter settles a binding whose last request may have reached the apiserver: the context
// that carried it may be over, so the read gets a short deadline of its own.
func (b *APIBinder) confirmAfter(t podTarget, lastErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.ConfirmTimeout)
	defer cancel()
	done, err, readErr := b.readOutcome(ctx, t, lastErr)
	switch {
	case done:
		return err
	case readErr != nil:
		return fmt.Errorf("binding %s to %s: outcome unknown, and reading the pod failed too (%v): %w", t, t.node, readErr, lastErr)
	}
	return fmt.Errorf("pod %s is not bound: %w", t, lastErr)
}

// readOutcome reads the pod and judges the binding by it; readErr is set when the read itself
// failed for a reason other than the pod being gone.
func (b *APIBinder) readOutcome(ctx context.Context, t podTarget, cause error) (done bool, err, readErr error) {
	pod, getErr := b.Client.CoreV1().Pods(t.namespace).Get(ctx, t.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(getErr):
		return true, fmt.Errorf("%w: pod %s was deleted (%v)", ErrPodGone, t, cause), nil
	case getErr != nil:
		return false, nil, getErr
	}
	done, err = judge(t, pod, cause)
	return done, err, nil
}

// judge decides a binding's outcome from the pod as the apiserver has it now.
func judge(t podTarget, pod *corev1.Pod, cause error) (done bool, err error) {
	switch {
	case t.uid != "" && pod.UID != t.uid:
		return true, fmt.Errorf("%w: pod %s was recreated (uid %s, lockstep was binding %s)", ErrPodGone, t, pod.UID, t.uid)
	case pod.Spec.NodeName == t.node:
		return true, nil // this binding landed, its answer was lost
	case pod.Spec.NodeName != "":
		return true, fmt.Errorf("%w: pod %s is bound to node %s, not %s (%v)", ErrBoundElsewhere, t, pod.Spec.NodeName, t.node, cause)
	case pod.DeletionTimestamp != nil:
		return true, fmt.Errorf("%w: pod %s is being deleted (%v)", ErrPodGone, t, cause)
	}
	return false, nil
}

// needsRead: answers after which only the pod itself tells whether binding again can help. A
// conflict is the pod bound already (by this binding's lost answer or by someone else) or a
// stale uid; an internal error is also how the apiserver refuses a pod that is being deleted.
func needsRead(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsInternalError(err)
}

// answerMayBeLost: the request may have been applied although no answer said so.
func answerMayBeLost(err error) bool {
	if err == nil || errors.Is(err, errNotSent) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsUnexpectedServerError(err)
	}
	return true // a network error or a context that ended while the request was in flight
}

// transient reports whether a failed binding may succeed if sent again.
func transient(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsConflict(err):
		// Left unsettled by a read: the pod is unbound and was not recreated, so a conflict can
		// only be a write racing this one; the next attempt tells.
		return true
	}
	var netErr net.Error
	var status apierrors.APIStatus
	return errors.As(err, &netErr) || !errors.As(err, &status)
}

// pause waits d or until ctx ends, and reports whether it waited the whole time.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
