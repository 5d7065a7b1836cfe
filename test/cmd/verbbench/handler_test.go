package main

import (
	"testing"
)

// BenchmarkHandler5000 runs filter and prioritize through lockstep's HTTP handler in process, with
// the manager holding what make bench loads at its largest size: the quick loop for profiling
// (go test -bench Handler -cpuprofile) before the real-binary measurement.
func BenchmarkHandler5000(b *testing.B) {
	h, names, stop := inProcessHandler(5000)
	defer stop()
	body := argsBody(names)
	for _, verb := range []string{"filter", "prioritize"} {
		b.Run(verb, benchmarkVerb(h, verb, body))
	}
}

// BenchmarkHandler5000DRA is BenchmarkHandler5000 with each node's GPUs published as DRA devices.
func BenchmarkHandler5000DRA(b *testing.B) {
	draGPUs = true
	defer func() { draGPUs = false }()
	BenchmarkHandler5000(b)
}
