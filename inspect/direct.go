package inspect

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Direct reads lockstep's debug address at a URL this machine already reaches: lockstep beside
// the scheduler on a control-plane node, where the debug address is the node's loopback, or
// `make demo`. It goes around the apiserver, so it is for those who can reach that address anyway.
type Direct struct {
	// URL is the debug address's base, e.g. http://127.0.0.1:8889.
	URL    string
	Client *http.Client
}

// Get asks lockstep for path and returns the body of a 200 answer.
func (d Direct) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(d.URL, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("--debug-url %s: %w", d.URL, err)
	}
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach lockstep at --debug-url %s: %w", d.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s from lockstep at %s: %w", path, d.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &AnswerError{Path: path, Status: resp.StatusCode, Message: errorMessage(body)}
	}
	return body, nil
}
