package gang

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// effects are what a decision tells the world: Events and pod conditions. A verb collects them
// while it holds the manager's lock and applies them once it has let go, so that nothing outside
// lockstep's own state is touched under the lock. Metrics are recorded where the outcome is known,
// also outside the lock.
type effects struct {
	events     []event
	conditions []conditionWrite
	// gangs changed, for Config.OnGangChange.
	gangs []string
	// evictions are preemptions to carry out.
	evictions []eviction
}

// touched notes that a gang changed.
func (fx *effects) touched(gang string) {
	if gang != "" && !slices.Contains(fx.gangs, gang) {
		fx.gangs = append(fx.gangs, gang)
	}
}

type event struct {
	ref                        *corev1.ObjectReference
	eventType, reason, message string
}

// podEvent adds an Event on a pod unless it is the same as the last one lockstep wrote there: the
// scheduler retries a waiting pod every few seconds, and one line per change is what a reader
// wants. It updates the pod's record, so it too runs under the lock.
func (fx *effects) podEvent(p *podInfo, eventType, reason, message string) {
	key := reason + "\x00" + message
	if p.lastEvent == key {
		return
	}
	p.lastEvent = key
	fx.events = append(fx.events, event{p.ref(), eventType, reason, message})
}

func (fx *effects) nodeEvent(ref *corev1.ObjectReference, eventType, reason, message string) {
	fx.events = append(fx.events, event{ref, eventType, reason, message})
}

func (fx *effects) condition(w conditionWrite) { fx.conditions = append(fx.conditions, w) }

// apply writes the effects; the caller must not hold the lock.
func (m *Manager) apply(fx *effects) {
	for _, e := range fx.events {
		m.recorder.Event(e.ref, e.eventType, e.reason, e.message)
	}
	m.conditions.enqueue(fx.conditions)
	for _, e := range fx.evictions {
		go m.evict(e)
	}
	if m.cfg.OnGangChange != nil {
		for _, g := range fx.gangs {
			m.cfg.OnGangChange(g)
		}
	}
}
