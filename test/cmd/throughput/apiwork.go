package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// apiWork counts what kube-apiserver did in a phase, from its own metrics: requests by verb and
// resource, watch events sent by kind, watchers it cut off, garbage collections, and bindings it
// answered late. Its CPU per
// pod differs between modes by more than anything else in the cost table; this says on what.
type apiWork map[string]float64

// apiMetrics reads kube-apiserver's /metrics.
type apiMetrics struct {
	client *http.Client
	url    string
}

func newAPIMetrics(cfg *rest.Config) (*apiMetrics, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &apiMetrics{client: client, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

// read is the apiserver's counters now (take says which).
func (a *apiMetrics) read(ctx context.Context) (apiWork, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-apiserver /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	work := apiWork{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			work.take(name, m)
		}
	}
	return work, nil
}

// take adds one series of the metrics that matter, keyed by the labels that tell it apart.
func (w apiWork) take(name string, m *dto.Metric) {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	switch name {
	case "apiserver_request_total":
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		w["request "+labels["verb"]+" "+res+" "+labels["code"]] += m.GetCounter().GetValue()
	case "apiserver_watch_events_total":
		// The label was kind before Kubernetes 1.32 and is resource since.
		w["watch events sent: "+labels["resource"]+labels["kind"]] += m.GetCounter().GetValue()
	case "apiserver_terminated_watchers_total":
		w["watchers cut off: "+labels["resource"]] += m.GetCounter().GetValue()
	case "go_gc_duration_seconds":
		w["garbage collections"] += float64(m.GetSummary().GetSampleCount())
	case "apiserver_request_duration_seconds":
		if labels["verb"] == "POST" && labels["subresource"] == "binding" {
			countSlow(w, m.GetHistogram())
		}
	}
}

// slowAfter are the latencies a binding is counted slow past: a gang's bindings go out together,
// so one answered late keeps its gang partly bound that long.
var slowAfter = []float64{0.4, 1}

// countSlow counts, from the apiserver's latency histogram of bindings, those it answered later
// than each of slowAfter (bucket bounds in its histogram).
func countSlow(work apiWork, h *dto.Histogram) {
	for _, b := range h.GetBucket() {
		for _, bound := range slowAfter {
			if b.GetUpperBound() == bound {
				work[slowKey(bound)] += float64(h.GetSampleCount() - b.GetCumulativeCount())
			}
		}
	}
}

const slowPrefix = "bindings answered after "

// perPodFloor is how much per 1,000 pods a row of the work table needs in some mode to be shown.
// Watches and their events need more: a scheduler that starts informers for some forty kinds
// (koord-scheduler) opens a watch and gets a few events of each when it starts, nothing per pod.
func perPodFloor(key string) float64 {
	if strings.HasPrefix(key, "watch events sent: ") || strings.HasPrefix(key, "request WATCH ") {
		return 5
	}
	return 0.5
}

func slowKey(bound float64) string { return fmt.Sprintf("%s%gs", slowPrefix, bound) }

func (w apiWork) since(before apiWork) apiWork {
	out := apiWork{}
	for k, v := range w {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// printAPIWork is the apiserver's work per 1,000 pods bound in the ordinary and the gang phase,
// mode beside mode.
func printAPIWork(out io.Writer, results []result) {
	for _, phase := range []string{"ordinary", "gangs"} {
		printAPIPhase(out, results, phase)
	}
}

func printAPIPhase(out io.Writer, results []result, phase string) {
	var costs []cost
	keys := map[string]bool{}
	for _, r := range results {
		for _, c := range r.costs {
			if c.phase == phase && c.api != nil && c.pods > 0 {
				costs = append(costs, c)
				for k := range c.api {
					keys[k] = true
				}
			}
		}
	}
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(out, "\nkube-apiserver's work in the %s phase, per 1,000 pods bound (its /metrics; the bench's own scrapes included):\n", phase)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, c := range costs {
		fmt.Fprintf(tw, "%s\t", c.mode)
	}
	fmt.Fprintln(tw)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if strings.HasPrefix(k, slowPrefix) {
			continue // counted whole below: rare, and what matters is that there are any
		}
		if !slices.ContainsFunc(costs, func(c cost) bool { return 1000*c.api[k]/float64(c.pods) >= perPodFloor(k) }) {
			continue // the apiserver's housekeeping: nothing per pod in any mode
		}
		fmt.Fprintf(tw, "%s\t", k)
		for _, c := range costs {
			fmt.Fprintf(tw, "%.0f\t", 1000*c.api[k]/float64(c.pods))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, bound := range slowAfter {
		fmt.Fprintf(out, "  bindings the apiserver answered after %gs, in all:", bound)
		for _, c := range costs {
			fmt.Fprintf(out, " %s %.0f", c.mode, c.api[slowKey(bound)])
		}
		fmt.Fprintln(out)
	}
}
