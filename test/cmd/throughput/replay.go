package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// traceOptions choose the trace workload (-workload trace).
type traceOptions struct {
	dir, list string
	seed      uint64
	// rate is how many pods arrive per second; a gang's members arrive together.
	rate float64
	// placeWait is how long an item may stay unplaced before it counts as one that cannot be.
	placeWait time.Duration
	// pauseAfter pauses arrivals while an item has waited this long unplaced, so that the pods
	// behind one that cannot be placed do not fill the GPUs it was refused before its placeWait
	// is up; arrivals go on at the rate once it is placed.
	pauseAfter time.Duration
}

// traceResult is what the trace workload measured in one mode, at the moment its replay stopped:
// the first item that could not be placed, or the end of the trace.
type traceResult struct {
	items, pods int // items and pods created
	gangs       int // gangs (two members or more) created
	placedGangs int // gangs with every member bound
	onFewest    int // of those, gangs on the fewest nodes that hold their GPUs
	partial     int // gangs with some but not all members bound
	// stop is the first item (a gang, or an ordinary pod: a gang of one to bench-packing) not
	// placed within placeWait, nil when the trace ran out first; stopAt is when that was seen,
	// from the replay's start.
	stop   *traceItem
	stopAt time.Duration
	// why is the scheduler's last word on the stopping item (its PodScheduled condition).
	why string
	// allocated is the GPUs of bound pods at the stop, of capacity on the nodes.
	allocated, capacity int
	// lateBound is how many of the pods bound at the stop arrived after the stopping gang.
	lateBound int
	// placed is, per placed item, its last member's Create to its last member bound;
	// gangPlaced the same for gangs alone.
	placed, gangPlaced []time.Duration
	// gangPods are the members of placed gangs; gangSpan runs from the first gang's creation to
	// the last placed gang's last bind, so gangPods over it is the gangs' rate while they came.
	gangPods int
	gangSpan time.Duration
}

// traceMode runs the trace workload through one mode.
func (b *bench) traceMode(ctx context.Context, m mode) result {
	return b.withMode(ctx, m, func(ls *harness.Lockstep, res *result) error {
		return b.replay(ctx, m, ls, res)
	})
}

// replay starts the scheduler on a quiet, empty cluster, then creates the items at the arrival
// rate, in trace order, until one is not placed within placeWait or every item is placed. An
// ordinary pod that cannot be placed ends the replay as a gang does: it is a gang of one to
// bench-packing, whose replay this follows, and on nodes of equal size it is what fragmentation
// refuses first (a pod of 8 GPUs with no node empty), while later pods of 1 GPU would go on
// filling every hole.
func (b *bench) replay(ctx context.Context, m mode, ls *harness.Lockstep, res *result) error {
	b.settle(ctx, m, ls)
	if _, err := b.startScheduler(ctx, m); err != nil {
		return err
	}
	meter := b.meter(ctx, m, ls)
	now := time.Now()
	rp := &replayRun{b: b, m: m, start: now, due: now, created: map[int]time.Time{}}
	err := rp.run(ctx)
	tr := rp.measure(later(rp.stopAt, rp.start))
	res.trace = &tr
	res.costs = append(res.costs, meter.stop(ctx, m.key, "trace", rp.boundPods()))
	return err
}

// replayRun is one mode's replay in progress.
type replayRun struct {
	b     *bench
	m     mode
	start time.Time
	next  int       // the next item to create
	due   time.Time // when it arrives
	pods  int       // pods created so far
	// created is when each created item's last member's Create returned.
	created map[int]time.Time
	// pending are created items not yet placed, oldest first.
	pending []int
	placed  []time.Duration
	// gangPlaced, gangPods, firstGang and lastGangBind feed traceResult's gang figures.
	gangPlaced              []time.Duration
	gangPods                int
	firstGang, lastGangBind time.Time
	stop                    int // the stopping item's index, -1 while none
	stopAt                  time.Time
}

// run creates items on schedule and watches them until the replay stops.
func (rp *replayRun) run(ctx context.Context) error {
	rp.stop = -1
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	items := rp.b.items
	for {
		now := time.Now()
		stop, paused := rp.check(now)
		if stop || (rp.next == len(items) && len(rp.pending) == 0) {
			rp.stopAt = now
			return nil
		}
		if paused {
			rp.due = later(rp.due, now)
		} else if err := rp.createDue(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// createDue creates every item whose arrival time has come: an item of n pods is due n/rate
// seconds after the one before it.
func (rp *replayRun) createDue(ctx context.Context) error {
	items := rp.b.items
	for rp.next < len(items) && !time.Now().Before(rp.due) {
		item := items[rp.next]
		if err := rp.b.createItem(ctx, rp.m.dialect, item); err != nil {
			return fmt.Errorf("creating %s: %w", item.name, err)
		}
		rp.created[rp.next] = time.Now()
		if item.isGang() && rp.firstGang.IsZero() {
			rp.firstGang = rp.created[rp.next]
		}
		rp.pending = append(rp.pending, rp.next)
		rp.pods += item.size
		rp.next++
		rp.due = rp.due.Add(time.Duration(float64(item.size) / rp.b.trace.rate * float64(time.Second)))
	}
	return nil
}

// check retires the pending items that are placed. It says whether the oldest unplaced item has
// waited past placeWait (the replay stops there: rp.stop) or past pauseAfter (arrivals pause).
func (rp *replayRun) check(now time.Time) (stop, paused bool) {
	keep := rp.pending[:0]
	for _, i := range rp.pending {
		item := rp.b.items[i]
		at := rp.b.binds.boundAt(item.members())
		if len(at) == item.size {
			rp.retire(item, i, lastOf(at))
			continue
		}
		keep = append(keep, i)
	}
	rp.pending = keep
	if len(keep) == 0 {
		return false, false
	}
	waited := now.Sub(rp.created[keep[0]])
	if waited > rp.b.trace.placeWait {
		rp.stop = keep[0]
		return true, true
	}
	return false, waited > rp.b.trace.pauseAfter
}

// retire records a placed item whose last member bound at last.
func (rp *replayRun) retire(item traceItem, i int, last time.Time) {
	took := max(0, last.Sub(rp.created[i]))
	rp.placed = append(rp.placed, took)
	if !item.isGang() {
		return
	}
	rp.gangPlaced = append(rp.gangPlaced, took)
	rp.gangPods += item.size
	rp.lastGangBind = later(rp.lastGangBind, last)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func lastOf(at map[string]time.Time) time.Time {
	var last time.Time
	for _, t := range at {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// measure takes the figures of the moment the replay stopped.
func (rp *replayRun) measure(now time.Time) traceResult {
	w := rp.b.w
	tr := traceResult{items: rp.next, pods: rp.pods, placed: rp.placed, gangPlaced: rp.gangPlaced, gangPods: rp.gangPods,
		capacity: w.nodes * w.gpusPerNode, stopAt: now.Sub(rp.start)}
	if !rp.lastGangBind.IsZero() {
		tr.gangSpan = rp.lastGangBind.Sub(rp.firstGang)
	}
	if rp.stop >= 0 {
		stop := rp.b.items[rp.stop]
		tr.stop = &stop
		tr.why = "bound after all, as the replay stopped"
		if unbound := rp.unbound(stop); len(unbound) > 0 {
			tr.why = rp.b.binds.whyUnbound(unbound)
		}
	}
	for i := range rp.next {
		rp.measureItem(&tr, i)
	}
	return tr
}

// measureItem adds one created item to the figures.
func (rp *replayRun) measureItem(tr *traceResult, i int) {
	item := rp.b.items[i]
	nodes := map[string]bool{}
	bound := 0
	for _, name := range item.members() {
		if node := rp.b.binds.nodeOf(name); node != "" {
			nodes[node] = true
			bound++
		}
	}
	tr.allocated += bound * item.gpus
	if rp.stop >= 0 && i > rp.stop {
		tr.lateBound += bound
	}
	if !item.isGang() {
		return
	}
	tr.gangs++
	switch {
	case bound == item.size:
		tr.placedGangs++
		if len(nodes) == fewestNodes(item, rp.b.w.gpusPerNode) {
			tr.onFewest++
		}
	case bound > 0:
		tr.partial++
	}
}

// fewestNodes is how few nodes can hold a gang: its GPUs over a node's, rounded up (the pods'
// CPU and memory are small enough never to be what limits a node).
func fewestNodes(item traceItem, gpusPerNode int) int {
	perNode := max(1, gpusPerNode/item.gpus) // members one node holds
	return (item.size + perNode - 1) / perNode
}

// unbound are the item's members not bound.
func (rp *replayRun) unbound(item traceItem) []string {
	var out []string
	for _, name := range item.members() {
		if rp.b.binds.nodeOf(name) == "" {
			out = append(out, name)
		}
	}
	return out
}

// boundPods is how many of the created pods are bound.
func (rp *replayRun) boundPods() int {
	n := 0
	for i := range rp.next {
		for _, name := range rp.b.items[i].members() {
			if rp.b.binds.nodeOf(name) != "" {
				n++
			}
		}
	}
	return n
}

// createItem creates an item's PodGroup (a gang's, in the dialects that have them) and pods, the
// members back to back.
func (b *bench) createItem(ctx context.Context, d dialect, item traceItem) error {
	pods := make([]*corev1.Pod, 0, item.size)
	for _, name := range item.members() {
		if item.isGang() {
			pods = append(pods, d.member(name, item.name, item.size, item.gpus))
		} else {
			pods = append(pods, d.pod(name, item.gpus).Obj())
		}
	}
	if item.isGang() {
		if err := d.createPodGroup(ctx, b.dyn, item.name, item.size, pods[0]); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if _, err := b.client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
