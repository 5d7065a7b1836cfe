package inspect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A URL the user names is read as it is; lockstep's refusals and an address nobody listens on
// come back in words that name the URL.
func TestDirectFetcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/gangs" {
			_, _ = w.Write([]byte(`[]`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no such path"}`))
	}))
	defer srv.Close()

	body, err := Direct{URL: srv.URL + "/"}.Get(context.Background(), "/debug/gangs")
	require.NoError(t, err)
	assert.Equal(t, "[]", string(body))

	_, err = Direct{URL: srv.URL}.Get(context.Background(), "/debug/nope")
	var answer *AnswerError
	require.ErrorAs(t, err, &answer)
	assert.Equal(t, http.StatusNotFound, answer.Status)

	addr := srv.URL
	srv.Close()
	_, err = Direct{URL: addr}.Get(context.Background(), "/debug/gangs")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach lockstep at --debug-url "+addr)
}
