package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

func schemeForEvents() *runtime.Scheme { return scheme.Scheme }
