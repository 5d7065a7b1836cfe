package gang

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Giving back the devices of a gang that waits. kube-scheduler allocates a pod's claims in its
// cycle, before the pod's bind reaches lockstep, and keeps them allocated when the bind fails:
// the pod's next cycle then goes back to the same devices. A gang member held at bind thus holds
// its devices; that is what its reservation is for. Once no reservation holds it (expired, taken
// over, released), the devices would stay taken by a gang that is not running, and the next job
// would find them gone. lockstep gives them back, as the scheduler's own DynamicResources
// PostFilter does for a pod it cannot place: the claim's allocation cleared, the claim kept.

// ClaimReleaser clears a claim's allocation. uid guards against a claim recreated under the name;
// pods are the pods whose reservation of it may be cleared with it (lockstep's waiting members):
// a claim reserved for any other pod is left alone.
type ClaimReleaser interface {
	Release(ctx context.Context, namespace, name string, uid types.UID, pods []types.UID) error
}

// claimRelease is one claim to give back, decided under the lock.
type claimRelease struct {
	namespace, name string
	uid             types.UID
	pods            []types.UID
}

// releaseAgainAfter keeps lockstep from asking again for a release that is on its way: the
// informer reports the cleared allocation a moment after the write.
const releaseAgainAfter = 10 * time.Second

// releases are the allocated claims of waiting gang members that no reservation holds: every pod
// each claim is for is such a member. It notes each on its pods' events. The sweep calls it
// under the lock.
func (l *ledger) releases(book *reservationBook, now time.Time, fx *effects) []claimRelease {
	if !l.devices.HasNodes() {
		return nil
	}
	var out []claimRelease
	for _, c := range l.devices.Allocated() {
		pods, ok := l.waitingFor(c, book)
		if !ok || now.Sub(l.released[c.UID]) < releaseAgainAfter {
			continue
		}
		l.released[c.UID] = now
		out = append(out, claimRelease{namespace: c.Namespace, name: c.Name, uid: c.UID, pods: pods})
		node := l.devices.DeviceNode(c.Allocated[0])
		for _, uid := range pods {
			p := l.pods[uid]
			fx.podEvent(p, corev1.EventTypeNormal, wellknown.ReasonGangDevicesReleased, fmt.Sprintf(
				"gang %s holds no reservation for pod %s: lockstep gave back the devices ResourceClaim %s was allocated on node %s, so that a job that can run gets them",
				p.Gang, p.Key(), c.Key(), node))
		}
	}
	for uid, at := range l.released { // forget the old ones, so the map stays small
		if now.Sub(at) >= releaseAgainAfter {
			delete(l.released, uid)
		}
	}
	return out
}

// waitingFor is the pods a claim is allocated for when every one of them is an unbound gang member
// no live reservation holds a place for; ok is false otherwise, and for a claim for no known pod.
func (l *ledger) waitingFor(c *dra.Claim, book *reservationBook) ([]types.UID, bool) {
	pods := consumers(c)
	slices.Sort(pods)
	pods = slices.Compact(pods)
	if len(pods) == 0 {
		return nil, false
	}
	for _, uid := range pods {
		p := l.pods[uid]
		if p == nil || p.Gang == "" || p.Holds() || p.Terminal {
			return nil, false
		}
		if res := book.live(p.Gang); res != nil && res.slotOf(uid) != nil {
			return nil, false
		}
	}
	return pods, true
}

// releaseRun gives one claim back, after the lock.
type releaseRun struct {
	m *Manager
	r claimRelease
}

func (run releaseRun) run() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := run.r
	if err := run.m.cfg.ClaimReleaser.Release(ctx, r.namespace, r.name, r.uid, r.pods); err != nil {
		klog.ErrorS(err, "Giving back a waiting gang's devices failed; the next sweep tries again", "claim", r.namespace+"/"+r.name)
		return
	}
	klog.InfoS("Gave back a waiting gang member's devices", "claim", r.namespace+"/"+r.name)
}

// APIClaimReleaser clears allocations through the ResourceClaim status subresource.
type APIClaimReleaser struct {
	Client kubernetes.Interface
}

// Release reads the claim and clears its allocation and reservations, unless it
// is another claim of the name, is not allocated, or is reserved for a pod not among pods. The
// update carries the resourceVersion read, so a claim changed meanwhile is left alone.
func (a APIClaimReleaser) Release(ctx context.Context, namespace, name string, uid types.UID, pods []types.UID) error {
	claim, err := a.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading ResourceClaim %s/%s: %w", namespace, name, err)
	case claim.UID != uid, claim.Status.Allocation == nil:
		return nil
	}
	for _, r := range claim.Status.ReservedFor {
		if !slices.Contains(pods, r.UID) {
			return nil
		}
	}
	// status.devices is the driver's to write (resourceclaims/driver), and no driver prepared
	// devices for a pod that never ran; it is left as it is.
	claim.Status.Allocation, claim.Status.ReservedFor = nil, nil
	if _, err := a.Client.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("clearing the allocation of ResourceClaim %s/%s: %w", namespace, name, err)
	}
	return nil
}
