// Package gpu models how the GPUs inside one node are wired to each other and picks the GPUs a
// pod should get so that gang-scheduled training jobs land on well-connected devices.
//
// A Topology is the matrix `nvidia-smi topo -m` prints, restricted to GPUs: for every pair of
// GPUs the class of the path between them (an NVLink bond or one of the PCIe path classes), plus
// each GPU's NUMA node. It reaches the scheduler through the node annotation
// wellknown.AnnotationGPUTopology, which gpu-agent fills in from nvidia-smi on each node; FromNode
// falls back to a table of known systems and finally to a uniform guess when the annotation is
// missing.
//
// BestSet and Score are the scheduler-facing half: BestSet chooses k GPUs out of the free ones,
// Score turns that choice into a 0..10 extender priority. See docs/gpu-topology.md for the
// annotation format, the known-systems table and the scoring rules.
//
// It knows one node at a time and nothing of pods, gangs or which GPUs are taken: callers pass
// the free set (FreeSet, whose GPUs of unknown indices are taken to be the highest-numbered), and
// a Memo remembers one call's scores by state of use. It never talks to the apiserver (gpu-agent
// does that with what it returns).
package gpu
