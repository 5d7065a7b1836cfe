package main

import "testing"

// A small run goes through the whole bench: the setup's checks (every gang waits for capacity,
// not for its queue, and is counted waiting in its queue), the interleaved calls and the report.
func TestSmallRun(t *testing.T) {
	c := config{nodes: 400, queues: 8, gangs: 40, reps: 2, calls: 10, batch: 3}
	if err := run(c, "", false); err != nil {
		t.Fatal(err)
	}
	if err := run(c, "", true); err != nil {
		t.Fatal("control run:", err)
	}
}

// Every queue leaves room for one more quorum under its capability, so that the gangs reach
// placement; and the running gangs spread over the queues by weight.
func TestQueuesLeaveRoomForAQuorum(t *testing.T) {
	c := config{nodes: 5000, queues: 100, gangs: 1000}
	o := build(c)
	used := map[string]int64{}
	for _, r := range o.running {
		used[r.Spec.Queue.Name] += int64(r.Spec.MinAvailable)
	}
	for _, q := range o.queues {
		if want := 145 * q.Weight; used[q.Name] != want {
			t.Errorf("queue %s of weight %d runs %d GPUs, want %d", q.Name, q.Weight, used[q.Name], want)
		}
		if q.Capability.Named != 0 && q.Capability.Amount.GPU < used[q.Name]+o.quorum.GPU {
			t.Errorf("queue %s: capability %d GPUs leaves no room for a quorum of %d beside %d", q.Name, q.Capability.Amount.GPU, o.quorum.GPU, used[q.Name])
		}
	}
}
