package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/lockstep-sched/lockstep/views"
)

// Answer is what lockstep answered, raw for -o json and -o yaml, and decoded for the tables.
type Answer[T any] struct {
	Raw   json.RawMessage
	Items []T
}

// ReadGangs reads /debug/gangs, of one namespace unless namespace is empty.
func ReadGangs(ctx context.Context, f Fetcher, namespace string) (Answer[views.GangStatus], error) {
	path := "/debug/gangs"
	if namespace != "" {
		path += "?namespace=" + url.QueryEscape(namespace)
	}
	return read[views.GangStatus](ctx, f, path, func(raw []byte, out *[]views.GangStatus) error { return json.Unmarshal(raw, out) })
}

// ReadNodes reads /debug/nodes.
func ReadNodes(ctx context.Context, f Fetcher) (Answer[views.NodeStatus], error) {
	return read[views.NodeStatus](ctx, f, "/debug/nodes", func(raw []byte, out *[]views.NodeStatus) error { return json.Unmarshal(raw, out) })
}

// ReadQueues reads /debug/queues.
func ReadQueues(ctx context.Context, f Fetcher) (Answer[views.QueueStatus], error) {
	return read[views.QueueStatus](ctx, f, "/debug/queues", func(raw []byte, out *[]views.QueueStatus) error {
		var wrapped views.QueueList
		err := json.Unmarshal(raw, &wrapped)
		*out = wrapped.Queues
		return err
	})
}

func read[T any](ctx context.Context, f Fetcher, path string, decode func([]byte, *[]T) error) (Answer[T], error) {
	raw, err := f.Get(ctx, path)
	if err != nil {
		return Answer[T]{}, err
	}
	var items []T
	if err := decode(raw, &items); err != nil {
		return Answer[T]{}, fmt.Errorf("lockstep's answer to GET %s is not what this plugin reads (a different lockstep version?): %w", path, err)
	}
	return Answer[T]{Raw: raw, Items: items}, nil
}
