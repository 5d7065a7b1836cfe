// Package dra reads what Dynamic Resource Allocation (resource.k8s.io/v1) publishes the way
// lockstep counts GPUs. A GPU is a device-plugin GPU, or a DRA device of a class that counts as
// one (classes.go). A node's DRA GPUs are the devices of those classes in its ResourceSlices
// (inventory.go); a claim's allocation takes the devices it names, and a pod asks for as many GPUs
// as its claims' requests of those classes count (claims.go). Whether a set of claims fits a node
// beside what is taken is answered by the structured allocator of
// k8s.io/dynamic-resource-allocation, the one kube-scheduler runs, CEL selectors included
// (fit.go): this package evaluates no CEL of its own and allocates nothing itself.
//
// It owns reading those objects into counts, devices and reasons. It calls no apiserver (package
// drawatch watches the objects) and keeps no lock: package gang holds the Inventory under its own
// lock, as it holds the quota book, and decides with it.
package dra
