package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func post(t *testing.T, h http.Handler, verb, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+verb, strings.NewReader(body)))
	return rec
}

func TestFilterAnswersTheFirstOfferedNode(t *testing.T) {
	h := newHandler(fake.NewClientset())
	rec := post(t, h, "filter", `{"Pod":{"metadata":{"name":"p"}},"NodeNames":["n1","n2","n3"],"Nodes":null}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got extenderv1.ExtenderFilterResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.NotNil(t, got.NodeNames)
	assert.Equal(t, []string{"n1"}, *got.NodeNames)
	assert.Empty(t, got.Error)
}

func TestMalformedRequestIsRefused(t *testing.T) {
	rec := post(t, newHandler(fake.NewClientset()), "filter", `{"NodeNames":[`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
}

func TestBindPostsTheBinding(t *testing.T) {
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}})
	var bound *corev1.Binding
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" {
			bound = c.GetObject().(*corev1.Binding)
			return true, nil, nil
		}
		return false, nil, nil
	})
	rec := post(t, newHandler(client), "bind", `{"PodName":"p","PodNamespace":"ns","PodUID":"u1","Node":"n7"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got extenderv1.ExtenderBindingResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Empty(t, got.Error)
	require.NotNil(t, bound, "no binding was posted")
	assert.Equal(t, "n7", bound.Target.Name)
	assert.Equal(t, "u1", string(bound.UID))
}
