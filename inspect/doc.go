// Package inspect is the logic of `kubectl lockstep`: it finds the lockstep pod, reaches its debug
// address through a port-forward the apiserver authorizes, reads /debug/gangs, /debug/nodes and
// /debug/queues, and turns what lockstep answered into tables and plain sentences.
//
// It owns reading and presenting, nothing else. It never writes: no object of the apiserver, no
// request to lockstep but GETs of its debug pages. It reaches lockstep through the apiserver's
// pods/portforward, so that RBAC alone decides who may read what lockstep knows (pods of every
// namespace); only a URL its user names (Direct) goes around it, to an address they reach
// anyway. Flags and process wiring belong to cmd/kubectl-lockstep.
package inspect
