package thirdparty

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitObjects(t *testing.T) {
	objs, err := splitObjects([]byte(`# a file that starts with a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: one}
data: {a: "1"}
---
# only a comment
---
---
apiVersion: batch/v1
kind: Job
metadata:
  name: two
spec:
  parallelism: 4
`))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "ConfigMap", objs[0].GetKind())
	assert.Equal(t, "one", objs[0].GetName())
	assert.Equal(t, "batch/v1", objs[1].GetAPIVersion())
	assert.Equal(t, int64(4), objs[1].Object["spec"].(map[string]any)["parallelism"], "whole numbers are int64, as from the apiserver")
}

func TestSplitObjectsErrors(t *testing.T) {
	_, err := splitObjects([]byte("apiVersion: v1\nkind: ConfigMap\n---\nmetadata: {name: no-kind}\n"))
	assert.ErrorContains(t, err, "document 2")
	_, err = splitObjects([]byte("a: [\n"))
	assert.ErrorContains(t, err, "document 1")

	objs, err := splitObjects(nil)
	assert.NoError(t, err)
	assert.Empty(t, objs)
}

func TestReadObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n"), 0o644))
	objs, err := ReadObjects(path)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, "ns1", objs[0].GetName())

	_, err = ReadObjects(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Error(t, err)
}

func TestDownloadEnv(t *testing.T) {
	env := downloadEnv([]string{"HOME=/h", "GOFLAGS=-buildvcs=false -mod=vendor", "GOWORK=/w/go.work", "GO111MODULE=auto"})
	assert.Equal(t, []string{"HOME=/h", "GOWORK=off", "GO111MODULE=on", "GOFLAGS=-buildvcs=false -mod=mod"}, env)
	assert.Equal(t, []string{"GOWORK=off", "GO111MODULE=on", "GOFLAGS=-mod=mod"}, downloadEnv(nil))
}

// TestCRDSets fetches every set from the module proxy (or the module cache) and checks that each
// file holds CRDs InstallCRDs can prepare. It needs the network the first time.
func TestCRDSets(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches modules from the Go module proxy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	paths, err := AllCRDs(ctx)
	require.NoError(t, err)
	crds, err := readCRDs(paths)
	require.NoError(t, err)
	names := make([]string, 0, len(crds))
	for _, c := range crds {
		assert.Equal(t, crdV1, c.GetAPIVersion(), c.GetName())
		names = append(names, c.GetName())
	}
	assert.ElementsMatch(t, []string{
		"podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io",
		"podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "jobs.batch.volcano.sh", "commands.bus.volcano.sh",
		"podgroups.scheduling.sigs.k8s.io", "elasticquotas.scheduling.sigs.k8s.io",
		"podgroups.scheduling.incubator.k8s.io", "podgroups.scheduling.sigs.dev",
		"queues.scheduling.incubator.k8s.io", "queues.scheduling.sigs.dev",
		"tfjobs.kubeflow.org", "mpijobs.kubeflow.org", "pytorchjobs.kubeflow.org",
	}, names)

	paths, err = KueueCRDs(ctx)
	require.NoError(t, err)
	crds, err = readCRDs(paths)
	require.NoError(t, err)
	names = names[:0]
	for _, c := range crds {
		assert.Equal(t, crdV1, c.GetAPIVersion(), c.GetName())
		names = append(names, c.GetName())
	}
	assert.Contains(t, names, "workloads.kueue.x-k8s.io", "Kueue's Workload, which lockstep reads")
}

func TestModuleDirErrors(t *testing.T) {
	_, err := ModuleDir(context.Background(), "", "v1.0.0")
	assert.Error(t, err)
	if testing.Short() {
		t.Skip("asks the Go module proxy")
	}
	_, err = ModuleDir(context.Background(), "github.com/lockstep-sched/no-such-module", "v0.0.1")
	assert.ErrorContains(t, err, "github.com/lockstep-sched/no-such-module@v0.0.1")
}
