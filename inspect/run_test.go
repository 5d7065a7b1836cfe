package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// recorded answers GETs with what a lockstep answered once.
type recorded map[string]string

func (r recorded) Get(_ context.Context, path string) ([]byte, error) {
	body, ok := r[path]
	if !ok {
		return nil, &AnswerError{Path: path, Status: 404, Message: "no such path " + path}
	}
	return []byte(body), nil
}

func run(t *testing.T, answers recorded, req Request, objects ...runtime.Object) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	req.Out, req.ErrOut = &out, &errOut
	cl := Cluster{Client: fake.NewSimpleClientset(objects...), Now: func() time.Time { return now },
		Connect: func(context.Context) (Fetcher, func(), error) { return answers, func() {}, nil }}
	err = Run(context.Background(), req, cl)
	return out.String(), errOut.String(), err
}

func gangsJSON(t *testing.T, gangs ...views.GangStatus) string {
	raw, err := json.Marshal(gangs)
	require.NoError(t, err)
	return string(raw)
}

func TestRunGangsJSONKeepsLockstepsAnswer(t *testing.T) {
	// A field this plugin does not know must come through, in lockstep's order.
	answer := `[{"namespace":"ml","name":"big","zNew":1,"minAvailable":3,"phase":"Waiting","members":[]}]`
	out, _, err := run(t, recorded{"/debug/gangs?namespace=ml": answer}, Request{Command: "gangs", Namespace: "ml", Output: "json"})
	require.NoError(t, err)
	assert.Equal(t, "[\n  {\n    \"namespace\": \"ml\",\n    \"name\": \"big\",\n    \"zNew\": 1,\n    \"minAvailable\": 3,\n    \"phase\": \"Waiting\",\n    \"members\": []\n  }\n]\n", out)
}

func TestRunGangsAllNamespacesYAML(t *testing.T) {
	g := aGang("ml", "big", 3).reason("3 members need 6 nvidia.com/gpu, 2 free").build()
	out, _, err := run(t, recorded{"/debug/gangs": gangsJSON(t, g)}, Request{Command: "gangs", Namespace: "ml", AllNamespaces: true, Output: "yaml"})
	require.NoError(t, err)
	assert.Contains(t, out, "- attempts: 0\n")
	assert.Contains(t, out, "  name: big\n")
}

func TestRunGangsTableWithAges(t *testing.T) {
	pod := aPod("ml", "big-0").Gang("big", 3).Obj()
	g := aGang("ml", "big", 3).member("big-0", "Pending", "").build()
	out, errOut, err := run(t, recorded{"/debug/gangs?namespace=ml": gangsJSON(t, g)}, Request{Command: "gangs", Namespace: "ml"}, pod)
	require.NoError(t, err)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "big    Koordinator annotations   Waiting   0/3/1             -       10m   ")
}

func TestRunNoGangs(t *testing.T) {
	out, errOut, err := run(t, recorded{"/debug/gangs?namespace=ml": "[]"}, Request{Command: "gangs", Namespace: "ml"})
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Equal(t, "No gangs found in namespace ml.\n", errOut)
}

func TestRunWhy(t *testing.T) {
	pod := aPod("ml", "big-0").Gang("big", 3).Obj()
	g := aGang("ml", "big", 3).reason("3 members need 6 nvidia.com/gpu, 2 free").member("big-0", "Pending", "").build()
	answers := recorded{"/debug/gangs?namespace=ml": gangsJSON(t, g)}

	out, _, err := run(t, answers, Request{Command: "why", Args: []string{"big-0"}, Namespace: "ml"}, pod)
	require.NoError(t, err)
	assert.Contains(t, out, "Pod ml/big-0 is a member of gang ml/big")
	assert.Contains(t, out, "free 4 more nvidia.com/gpu in the cluster")

	out, _, err = run(t, answers, Request{Command: "why", Args: []string{"big-0"}, Namespace: "ml", Output: "json"}, pod)
	require.NoError(t, err)
	var parsed struct {
		Pod  string           `json:"pod"`
		Gang views.GangStatus `json:"gang"`
		Why  string           `json:"why"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &parsed))
	assert.Equal(t, "ml/big-0", parsed.Pod)
	assert.Equal(t, "big", parsed.Gang.Name)
	assert.Contains(t, parsed.Why, "free 4 more")

	_, _, err = run(t, answers, Request{Command: "why", Args: []string{"nope"}, Namespace: "ml"}, pod)
	require.Error(t, err)
	assert.Equal(t, "pod nope not found in namespace ml (name another with -n)", err.Error())
}

func TestRunRefusesBadRequests(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Command: "pods"}, `unknown command "pods"; the commands are gangs, queues, nodes, why`},
		{Request{Command: "gangs", Output: "name"}, "-o name: the outputs are wide, json and yaml"},
		{Request{Command: "why"}, "why takes one pod name, got 0 arguments"},
		{Request{Command: "why", Args: []string{"p"}, AllNamespaces: true}, "why explains one pod: name its namespace with -n, not -A"},
		{Request{Command: "nodes", Args: []string{"x"}}, `nodes takes no arguments, got ["x"]`},
	} {
		_, _, err := run(t, recorded{}, tc.req)
		require.Error(t, err, "%+v", tc.req)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestRunLockstepAnswersAnError(t *testing.T) {
	_, _, err := run(t, recorded{}, Request{Command: "queues"})
	require.Error(t, err)
	assert.Equal(t, "lockstep answered 404 Not Found to GET /debug/queues: no such path /debug/queues", err.Error())
}
