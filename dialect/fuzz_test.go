package dialect

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Anyone who may create a pod writes its labels and annotations, and anyone who may create a
// PodGroup writes its spec: these readers take the least trusted input lockstep has. What they
// must never do is panic (that stops every scheduling call), refuse without naming the object
// and the key, or accept a value the gang manager cannot use.

// markers are a pod's labels and annotations as one fuzz input: one per line, "l key=value" for
// a label and "a key=value" for an annotation (any other first byte reads as an annotation too,
// so that no mutation is wasted). A line without "=" is a key with an empty value.
func markers(text string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		into := annotations
		if line[0] == 'l' {
			into = labels
		}
		key, value, _ := strings.Cut(strings.TrimPrefix(line[1:], " "), "=")
		into[key] = value
	}
	return labels, annotations
}

// markersText writes labels and annotations the way markers reads them, for seeds.
func markersText(labels, annotations map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "l %s=%s\n", k, labels[k])
	}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		fmt.Fprintf(&b, "a %s=%s\n", k, annotations[k])
	}
	return b.String()
}

// primaryMarker is a marker that makes a pod a gang member, in the order of precedence Pods.Read
// follows (families in order, Koordinator's own in koord-scheduler's order).
type primaryMarker struct {
	family string
	label  bool
	key    string
	// group names the group object the marker points at; nil when the pod carries the rules.
	group func(namespace, name string) string
	// byValue: the marker counts only with a value (YuniKorn takes an empty one as none), and the
	// gang is the pod's YuniKorn application, not the value.
	byValue bool
}

var primaryMarkers = []primaryMarker{
	{"Koordinator", true, wellknown.LabelKoordinatorPodGroup, KoordinatorKey, false},
	{"Koordinator", true, wellknown.LabelLightweightGangName, nil, false},
	{"Koordinator", false, wellknown.AnnotationGangName, nil, false},
	{"scheduler-plugins", true, wellknown.LabelCoschedulingPodGroup, CoschedulingKey, false},
	{"Volcano", false, wellknown.AnnotationGroupName, GroupNameKey, false},
	{"Kueue", true, wellknown.LabelKueuePodGroup, nil, false},
	{"KAI", false, wellknown.AnnotationKAIPodGroup, KAIKey, false},
	{"YuniKorn", false, wellknown.AnnotationYuniKornTaskGroupName, nil, true},
	{"YuniKorn", false, wellknown.AnnotationYuniKornTaskGroups, nil, true},
}

// markerKeys are every key the pod readers read, by where they read it.
var markerKeys = map[string]bool{
	"label " + wellknown.LabelKoordinatorPodGroup:               true,
	"label " + wellknown.LabelLightweightGangName:               true,
	"label " + wellknown.LabelLightweightMinAvailable:           true,
	"label " + wellknown.LabelCoschedulingPodGroup:              true,
	"label " + wellknown.LabelKueuePodGroup:                     true,
	"label " + wellknown.AnnotationVolcanoTask:                  true,
	"annotation " + wellknown.AnnotationGangName:                true,
	"annotation " + wellknown.AnnotationGangMinAvailable:        true,
	"annotation " + wellknown.AnnotationGangWaitingTime:         true,
	"annotation " + wellknown.AnnotationGangTotalNumber:         true,
	"annotation " + wellknown.AnnotationGangMode:                true,
	"annotation " + wellknown.AnnotationGangGroups:              true,
	"annotation " + wellknown.AnnotationGangMatchPolicy:         true,
	"annotation " + wellknown.AnnotationGangNetworkTopologySpec: true,
	"annotation " + wellknown.AnnotationGroupName:               true,
	"annotation " + wellknown.AnnotationVolcanoTask:             true,
	"annotation " + wellknown.AnnotationKueueTotalCount:         true,
	"annotation " + wellknown.AnnotationRequiredTopology:        true,
	"annotation " + wellknown.AnnotationPreferredTopology:       true,
	"annotation " + wellknown.AnnotationKueueRequiredTopology:   true,
	"annotation " + wellknown.AnnotationKueuePreferredTopology:  true,
	// YuniKorn's gang keys; KAI's pods refuse nothing but an empty PodGroup name.
	"annotation " + wellknown.AnnotationYuniKornTaskGroups:       true,
	"annotation " + wellknown.AnnotationYuniKornTaskGroupName:    true,
	"annotation " + wellknown.AnnotationYuniKornSchedulingPolicy: true,
}

// FuzzPodMarkers reads any labels and annotations as a pod's gang membership, in every dialect,
// and checks what Pods.Read promises: a pod without a gang marker is an ordinary pod and is never
// refused; the gang is the one the first marker in precedence names; two ecosystems' markers are
// refused naming both; every other refusal is a FieldError naming the pod, a key lockstep reads
// and the value it found there; and what is accepted is a gang the manager can use, carrying the
// values the pod wrote.
func FuzzPodMarkers(f *testing.F) {
	const (
		koordName = wellknown.AnnotationGangName
		koordMin  = wellknown.AnnotationGangMinAvailable
	)
	for _, seed := range []struct {
		labels, annotations map[string]string
	}{
		{}, // an ordinary pod
		{annotations: map[string]string{koordName: "mpi", koordMin: "2"}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangWaitingTime: "90s",
			wellknown.AnnotationGangTotalNumber: "4", wellknown.AnnotationGangMode: "NonStrict", wellknown.AnnotationGangMatchPolicy: "only-waiting",
			wellknown.AnnotationGangGroups: `["team-a/mpi","team-a/ps"]`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangMatchPolicy: "waiting-and-running",
			wellknown.AnnotationGangGroups: `["team-a/mpi"]`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2",
			wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"},{"layer":"BlockLayer","strategy":"MustGather"}]}`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2",
			wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"},{"layer":"ClusterTopologyLayer","strategy":"MustGather"}]}`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "0", wellknown.AnnotationGangWaitingTime: "-1s"}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "3", wellknown.AnnotationGangTotalNumber: "2"}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangGroups: `["team-a/mpi","ps"]`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangGroups: `"team-a/mpi"`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":[{"strategy":"MustGather"}]}`}},
		{annotations: map[string]string{koordName: "mpi", koordMin: "2", wellknown.AnnotationGangWaitingTime: "9999999999h"}},
		{annotations: map[string]string{koordName: "", koordMin: "2"}},
		{annotations: map[string]string{koordName: "mpi"}},
		{labels: map[string]string{wellknown.LabelKoordinatorPodGroup: "pg"}},
		{labels: map[string]string{wellknown.LabelKoordinatorPodGroup: ""}},
		{labels: map[string]string{wellknown.LabelLightweightGangName: "arena", wellknown.LabelLightweightMinAvailable: "3"}},
		{labels: map[string]string{wellknown.LabelLightweightGangName: "arena", wellknown.LabelLightweightMinAvailable: "+3"}},
		{labels: map[string]string{wellknown.LabelLightweightGangName: "arena"}},
		{labels: map[string]string{wellknown.LabelCoschedulingPodGroup: "tf"},
			annotations: map[string]string{wellknown.AnnotationRequiredTopology: "topology.kubernetes.io/zone", wellknown.AnnotationKueueRequiredTopology: "topology.kubernetes.io/zone"}},
		{labels: map[string]string{wellknown.LabelCoschedulingPodGroup: "tf"},
			annotations: map[string]string{wellknown.AnnotationRequiredTopology: "rack", wellknown.AnnotationPreferredTopology: "rack"}},
		{labels: map[string]string{wellknown.LabelCoschedulingPodGroup: "tf"}, annotations: map[string]string{wellknown.AnnotationKueuePreferredTopology: ""}},
		{annotations: map[string]string{wellknown.AnnotationGroupName: "vc-job", wellknown.AnnotationVolcanoTask: "worker"}},
		{labels: map[string]string{wellknown.AnnotationVolcanoTask: "ps"}, annotations: map[string]string{wellknown.AnnotationGroupName: "vc-job"}},
		{labels: map[string]string{wellknown.LabelKueuePodGroup: "kq"}, annotations: map[string]string{wellknown.AnnotationKueueTotalCount: "4"}},
		{labels: map[string]string{wellknown.LabelKueuePodGroup: "kq"}, annotations: map[string]string{wellknown.AnnotationKueueTotalCount: "-4"}},
		{labels: map[string]string{wellknown.LabelKueuePodGroup: "kq", wellknown.LabelCoschedulingPodGroup: "tf"}},
		{labels: map[string]string{wellknown.LabelLightweightGangName: "arena", wellknown.LabelLightweightMinAvailable: "2"},
			annotations: map[string]string{wellknown.AnnotationGroupName: "vc-job"}},
		// Topology keys alone make no gang: the pod is ordinary, its topology ignored.
		{annotations: map[string]string{wellknown.AnnotationRequiredTopology: ""}},
		{labels: map[string]string{wellknown.LabelKAISubGroup: "leader", wellknown.LabelKAIQueue: "research"},
			annotations: map[string]string{wellknown.AnnotationKAIPodGroup: "lws"}},
		{labels: map[string]string{wellknown.LabelKAIQueueLegacy: "old", wellknown.LabelKoordinatorQuotaName: "q"}},
		{annotations: map[string]string{wellknown.AnnotationKAIPodGroup: ""}},
		{annotations: map[string]string{wellknown.AnnotationKAIPodGroup: "tf", wellknown.AnnotationGroupName: "tf"}},
		{labels: map[string]string{wellknown.LabelYuniKornAppID: "spark-pi", wellknown.LabelYuniKornQueue: "root.spark"},
			annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroupName: "driver",
				wellknown.AnnotationYuniKornTaskGroups:       `[{"name":"driver","minMember":1,"minResource":{"cpu":"1"}},{"name":"exec","minMember":4}]`,
				wellknown.AnnotationYuniKornSchedulingPolicy: "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"}},
		{labels: map[string]string{wellknown.LabelYuniKornAppIDLegacy: "legacy", wellknown.LabelYuniKornQueueLegacy: "q"},
			annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `[{"name":"w","minMember":2}]`}},
		{labels: map[string]string{wellknown.LabelSparkAppSelector: "spark-1", wellknown.LabelYuniKornAppID: "ns-uniqueautogen"},
			annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `[{"name":"w","minMember":2}]`, wellknown.AnnotationYuniKornSchedulingPolicy: " placeholderTimeoutInSeconds=0 "}},
		{annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `[{"name":"w","minMember":0},{"name":"w","minMember":-1}]`}},
		{annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `[{"name":"w","minMember":"2"}]`}},
		{annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `{"name":"w"}`, wellknown.AnnotationYuniKornAppID: "a"}},
		{annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: `[{"name":"w","minMember":2}]`,
			wellknown.AnnotationYuniKornSchedulingPolicy: "placeholderTimeoutInSeconds=-1,gangSchedulingStyle=Lenient"}},
		{annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroupName: "w"}},
		{labels: map[string]string{wellknown.LabelYuniKornAppID: "web", wellknown.LabelYuniKornQueueLegacy: "q"},
			annotations: map[string]string{wellknown.AnnotationYuniKornTaskGroups: ""}},
		{labels: map[string]string{wellknown.LabelYuniKornQueueLegacy: "not YuniKorn's"}},
	} {
		f.Add("team-a", "w-0", markersText(seed.labels, seed.annotations))
	}
	f.Fuzz(func(t *testing.T, namespace, name, text string) {
		labels, annotations := markers(text)
		subject := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations}}
		got := Pods{}.Read(subject)
		require.Equal(t, describe(got), describe(Pods{}.Read(subject)), "read twice")
		pod := "pod " + namespace + "/" + name

		present := func(m primaryMarker) (string, bool) {
			values := annotations
			if m.label {
				values = labels
			}
			v, ok := values[m.key]
			if m.byValue {
				return yunikornApp(namespace, labels, annotations), v != ""
			}
			return v, ok
		}
		require.Equal(t, wantPodQueue(namespace, labels, annotations), got.Queue, "the queue the pod's own markers name: %q", text)
		got.Queue = quota.Ref{}
		var first *primaryMarker
		families := map[string]bool{}
		for i, m := range primaryMarkers {
			if _, ok := present(m); ok {
				families[m.family] = true
				if first == nil {
					first = &primaryMarkers[i]
				}
			}
		}
		if first == nil {
			require.Equal(t, gangspec.Membership{}, got, "a pod without gang markers is ordinary: %q", text)
			return
		}
		gangName, _ := present(*first)
		require.Equal(t, gangName, got.Gang, "the gang is what the first marker in precedence names: %q", text)

		if len(families) > 1 {
			require.Error(t, got.Err, "markers of %v: %q", slices.Sorted(maps.Keys(families)), text)
			require.Contains(t, got.Err.Error(), pod)
			for _, m := range primaryMarkers {
				if _, ok := present(m); ok && families[m.family] && m.family != first.family {
					require.Contains(t, got.Err.Error(), m.key, "a conflict names both markers")
					break
				}
			}
			require.Nil(t, got.Spec)
			require.Empty(t, got.Group)
			return
		}

		if got.Err != nil {
			checkPodRefusal(t, pod, labels, annotations, got.Err)
			return
		}
		switch first.family {
		case "Volcano":
			want, ok := annotations[wellknown.AnnotationVolcanoTask]
			if !ok {
				want = labels[wellknown.AnnotationVolcanoTask]
			}
			require.Equal(t, want, got.Task)
		case "KAI":
			require.Equal(t, labels[wellknown.LabelKAISubGroup], got.Task)
		case "YuniKorn":
			require.Equal(t, annotations[wellknown.AnnotationYuniKornTaskGroupName], got.Task)
		default:
			require.Empty(t, got.Task)
		}
		if first.group != nil {
			require.Nil(t, got.Spec)
			require.Equal(t, first.group(namespace, gangName), got.Group)
		} else {
			require.Empty(t, got.Group)
			require.NotNil(t, got.Spec, "a gang whose rules are on the pod has them read: %q", text)
			checkSpec(t, got.Spec, namespace, gangName)
			checkPodSpec(t, first.key, got.Spec, labels, annotations)
		}
		checkPodTopology(t, annotations, got.Topology)
	})
}

// describe is a membership with its error as words, so that two readings compare.
func describe(m gangspec.Membership) any {
	var err string
	if m.Err != nil {
		err = m.Err.Error()
	}
	m.Err = nil
	return struct {
		gangspec.Membership
		Err string
	}{m, err}
}

// checkPodRefusal holds a refusal of a single ecosystem's markers to naming the pod and a key
// lockstep reads, with the value the pod carries there ("" when the key is missing).
func checkPodRefusal(t *testing.T, pod string, labels, annotations map[string]string, err error) {
	require.Contains(t, err.Error(), pod)
	var fieldErr *gangspec.FieldError
	if !errors.As(err, &fieldErr) {
		// Only an empty group object name is refused without a FieldError; it names the marker.
		require.Contains(t, err.Error(), "the group name must not be empty")
		return
	}
	require.Equal(t, pod, fieldErr.Object)
	require.True(t, markerKeys[fieldErr.Field], "refusal names field %q, which lockstep does not read", fieldErr.Field)
	require.NotEmpty(t, fieldErr.Reason)
	where, key, _ := strings.Cut(fieldErr.Field, " ")
	values := annotations
	if where == "label" {
		values = labels
	}
	require.Equal(t, values[key], fieldErr.Value, "the value of %s", fieldErr.Field)
}

// checkPodSpec holds rules read from a pod to the values the pod wrote.
func checkPodSpec(t *testing.T, marker string, spec *gangspec.Spec, labels, annotations map[string]string) {
	switch marker {
	case wellknown.LabelLightweightGangName:
		require.Equal(t, strconv.Itoa(spec.MinAvailable), strings.TrimLeft(labels[wellknown.LabelLightweightMinAvailable], "+0"))
		require.Zero(t, spec.TotalNumber)
	case wellknown.LabelKueuePodGroup:
		require.Equal(t, strconv.Itoa(spec.MinAvailable), strings.TrimLeft(annotations[wellknown.AnnotationKueueTotalCount], "+0"))
		require.Equal(t, spec.MinAvailable, spec.TotalNumber, "every member of a Kueue group must be placed")
	case wellknown.AnnotationYuniKornTaskGroupName, wellknown.AnnotationYuniKornTaskGroups:
		checkYuniKornSpec(t, spec, spec.Namespace, labels, annotations)
	case wellknown.AnnotationGangName:
		require.Equal(t, strconv.Itoa(spec.MinAvailable), strings.TrimLeft(annotations[wellknown.AnnotationGangMinAvailable], "+0"))
		if raw, ok := annotations[wellknown.AnnotationGangWaitingTime]; ok {
			d, err := time.ParseDuration(raw)
			require.NoError(t, err)
			require.Equal(t, d, spec.WaitingTime)
		}
		checkKoordinatorOptions(t, spec, annotations)
	default:
		t.Fatalf("no rules are read from marker %s", marker)
	}
}

// yunikornApp is the application a YuniKorn pod of namespace belongs to, in the shim's order of
// keys (the fuzzed pods have no UID and name no scheduler).
func yunikornApp(namespace string, labels, annotations map[string]string) string {
	app := cmpOr(labels[wellknown.LabelYuniKornAppID], annotations[wellknown.AnnotationYuniKornAppID])
	if app == "" && yunikornKeys(labels, annotations) {
		app = cmpOr(labels[wellknown.LabelYuniKornAppIDLegacy], labels[wellknown.LabelSparkAppSelector])
	}
	if app == "" {
		return fmt.Sprintf("%.63s", "yunikorn-"+namespace+"-autogen")
	}
	if prefix, ok := strings.CutSuffix(app, "-uniqueautogen"); ok {
		return prefix + "-"
	}
	return app
}

func cmpOr(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// yunikornKeys reports whether the pod carries any yunikorn.apache.org key, which makes its
// unprefixed legacy keys YuniKorn's.
func yunikornKeys(labels, annotations map[string]string) bool {
	_, appLabel := labels[wellknown.LabelYuniKornAppID]
	_, queueLabel := labels[wellknown.LabelYuniKornQueue]
	_, app := annotations[wellknown.AnnotationYuniKornAppID]
	_, queue := annotations[wellknown.AnnotationYuniKornQueue]
	_, groups := annotations[wellknown.AnnotationYuniKornTaskGroups]
	_, group := annotations[wellknown.AnnotationYuniKornTaskGroupName]
	return appLabel || queueLabel || app || queue || groups || group
}

// wantPodQueue is the queue a pod's own markers name: Koordinator's quota label, else KAI's
// queue labels, else YuniKorn's queue keys; an empty value is none.
func wantPodQueue(namespace string, labels, annotations map[string]string) quota.Ref {
	if q := labels[wellknown.LabelKoordinatorQuotaName]; q != "" {
		return quota.Ref{Kind: KindKoordinatorElasticQuota, Name: q}
	}
	if q := cmpOr(labels[wellknown.LabelKAIQueue], labels[wellknown.LabelKAIQueueLegacy]); q != "" {
		return quota.Ref{Kind: KindKAIQueue, Name: q}
	}
	return wantYuniKornQueue(namespace, labels, annotations)
}

// wantYuniKornQueue is the queue of a pod with YuniKorn's keys: the one it names, lowercased
// and under root, else root.<namespace>.
func wantYuniKornQueue(namespace string, labels, annotations map[string]string) quota.Ref {
	if !yunikornKeys(labels, annotations) {
		return quota.Ref{}
	}
	q := strings.ToLower(cmpOr(labels[wellknown.LabelYuniKornQueue], annotations[wellknown.AnnotationYuniKornQueue], labels[wellknown.LabelYuniKornQueueLegacy]))
	switch {
	case q == "":
		q = "root." + namespace
	case !strings.HasPrefix(q, "root."):
		q = "root." + strings.ReplaceAll(q, ".", "_dot_")
	}
	return quota.Ref{Kind: KindYuniKornQueue, Name: q}
}

// checkYuniKornSpec holds a YuniKorn gang's rules to the task groups and the scheduling policy
// parameters its pod wrote, and YuniKorn's defaults for what it left out.
func checkYuniKornSpec(t *testing.T, spec *gangspec.Spec, namespace string, labels, annotations map[string]string) {
	var groups []struct {
		Name      string
		MinMember int64
	}
	require.NoError(t, stdjson.Unmarshal([]byte(annotations[wellknown.AnnotationYuniKornTaskGroups]), &groups))
	want := map[string]int{}
	total := 0
	for _, g := range groups {
		require.GreaterOrEqual(t, g.MinMember, int64(1), "task group %q", g.Name)
		want[g.Name] = int(g.MinMember)
		total += int(g.MinMember)
	}
	require.Equal(t, want, spec.MinPerTask)
	require.Equal(t, total, spec.MinAvailable)
	require.Equal(t, gangspec.OnceSatisfied, spec.Policy)
	wantTime, wantStyle := 15*time.Minute, "Soft"
	for _, pair := range strings.Fields(annotations[wellknown.AnnotationYuniKornSchedulingPolicy]) {
		k, v, _ := strings.Cut(pair, "=")
		if secs, _ := strconv.ParseInt(v, 10, 64); k == "placeholderTimeoutInSeconds" && secs > 0 {
			wantTime = time.Duration(secs) * time.Second
		}
		if k == "gangSchedulingStyle" {
			wantStyle = v
		}
	}
	require.Equal(t, wantTime, spec.WaitingTime)
	require.Equal(t, wantStyle, spec.Mode)
	require.Equal(t, wantYuniKornQueue(namespace, labels, annotations), spec.Queue, "the application's queue")
}

// checkKoordinatorOptions holds the Koordinator annotations read, on pods and PodGroups alike,
// to the values written.
func checkKoordinatorOptions(t *testing.T, spec *gangspec.Spec, annotations map[string]string) {
	if raw, ok := annotations[wellknown.AnnotationGangTotalNumber]; ok {
		require.Equal(t, strconv.Itoa(spec.TotalNumber), strings.TrimLeft(raw, "+0"))
	} else {
		require.Zero(t, spec.TotalNumber)
	}
	require.Equal(t, annotations[wellknown.AnnotationGangMode], spec.Mode)
	wantPolicy := map[string]gangspec.MatchPolicy{"": gangspec.OnceSatisfied, "once-satisfied": gangspec.OnceSatisfied,
		"waiting-and-running": gangspec.WaitingAndRunning, "only-waiting": gangspec.OnlyWaiting}[annotations[wellknown.AnnotationGangMatchPolicy]]
	require.Equal(t, wantPolicy, spec.Policy)
	if spec.Bundle != nil {
		var listed []string
		require.NoError(t, stdjson.Unmarshal([]byte(annotations[wellknown.AnnotationGangGroups]), &listed))
		for _, k := range spec.Bundle {
			require.True(t, k == spec.Key() || slices.Contains(listed, k), "gang group member %q was not listed", k)
		}
	}
	raw, ok := annotations[wellknown.AnnotationGangNetworkTopologySpec]
	if !ok {
		require.Nil(t, spec.Topology.Layers)
		return
	}
	// The layers asked, as Koordinator documents its gather strategies: MustGather layers make a
	// requirement, PreferGather layers alone a preference, and its ClusterTopologyLayer asks nothing.
	var v struct {
		GatherStrategy []struct{ Layer, Strategy string }
	}
	require.NoError(t, stdjson.Unmarshal([]byte(raw), &v))
	var must, prefer []string
	for _, rule := range v.GatherStrategy {
		switch {
		case rule.Layer == "ClusterTopologyLayer":
		case rule.Strategy == "MustGather":
			must = append(must, rule.Layer)
		case rule.Strategy == "PreferGather":
			prefer = append(prefer, rule.Layer)
		}
	}
	want := prefer
	if len(must) > 0 {
		want = must
	}
	require.Equal(t, want, spec.Topology.Layers, "layers of %s", raw)
	require.Equal(t, len(must) > 0, spec.Topology.Required, "required, by %s", raw)
}

// checkSpec holds rules, wherever they were read, to what the gang manager relies on.
func checkSpec(t *testing.T, spec *gangspec.Spec, namespace, name string) {
	require.Equal(t, namespace, spec.Namespace)
	require.Equal(t, name, spec.Name)
	require.GreaterOrEqual(t, spec.MinAvailable, 1, "min-available")
	if spec.TotalNumber != 0 {
		require.GreaterOrEqual(t, spec.TotalNumber, spec.MinAvailable, "total-number below min-available")
	}
	require.GreaterOrEqual(t, spec.WaitingTime, time.Duration(0), "waiting time")
	for task, n := range spec.MinPerTask {
		require.GreaterOrEqual(t, n, 1, "task %q: a task quorum of 0 is none, and kept as none", task)
	}
	require.Contains(t, []gangspec.MatchPolicy{gangspec.WaitingAndRunning, gangspec.OnceSatisfied, gangspec.OnlyWaiting}, spec.Policy)
	require.Contains(t, []string{"", "Strict", "NonStrict", "Soft", "Hard"}, spec.Mode)
	require.NotEmpty(t, spec.Source)
	if spec.Bundle != nil {
		require.GreaterOrEqual(t, len(spec.Bundle), 2, "a gang alone is no gang group")
		require.True(t, slices.IsSorted(spec.Bundle) && len(slices.Compact(slices.Clone(spec.Bundle))) == len(spec.Bundle), "gang group %q: sorted, each once", spec.Bundle)
		require.Contains(t, spec.Bundle, spec.Key(), "a gang group holds the gang itself")
		for _, k := range spec.Bundle {
			if k == spec.Key() {
				continue // the gang's own key, whatever its namespace and name (the apiserver checks those)
			}
			ns, n, ok := strings.Cut(k, "/")
			require.True(t, ok && ns != "" && n != "" && !strings.Contains(n, "/"), "gang group member %q is not namespace/name", k)
		}
	}
	checkTopology(t, spec.Topology)
}

// checkTopology holds a network request to one of its forms: a tier by key or name, by number,
// or by layers; none at all is the zero value.
func checkTopology(t *testing.T, top gangspec.Topology) {
	if top.Key == "" && top.Tier == 0 && top.Layers == nil {
		require.Equal(t, gangspec.Topology{}, top, "no request, but fields set")
		return
	}
	forms := 0
	for _, set := range []bool{top.Key != "", top.Tier != 0, top.Layers != nil} {
		if set {
			forms++
		}
	}
	require.Equal(t, 1, forms, "one form of network request: %+v", top)
	require.GreaterOrEqual(t, top.Tier, 0)
	for _, layer := range top.Layers {
		require.NotEmpty(t, layer)
		require.NotEqual(t, "ClusterTopologyLayer", layer, "the whole cluster asks nothing")
	}
	require.NotEmpty(t, top.Source)
}

// checkPodTopology holds a member's accepted tier request to its topology annotations: the first
// present in topologyKeys order, every other present one saying the same.
func checkPodTopology(t *testing.T, annotations map[string]string, got gangspec.Topology) {
	var want gangspec.Topology
	for _, k := range topologyKeys {
		v, ok := annotations[k.key]
		if !ok {
			continue
		}
		require.NotEmpty(t, v, "an empty %s is accepted", k.key)
		if want.Key == "" {
			want = gangspec.Topology{Key: v, Required: k.required, Source: "annotation " + k.key}
			continue
		}
		require.Equal(t, want.Key, v, "%s disagrees with %s and is accepted", k.key, want.Source)
		require.Equal(t, want.Required, k.required, "%s disagrees with %s and is accepted", k.key, want.Source)
	}
	require.Equal(t, want, got)
}

// FuzzPodGroup reads any spec and annotations as a PodGroup of each API lockstep reads. Its
// numbers arrive either as the dynamic client decodes them (int64 when whole, else float64) or
// all float64 (encoding/json), and toInt must read both alike. It checks: a refusal is a
// FieldError naming the object and a field this API reads, with an annotation's value as written;
// an accepted object is a gang the manager can use, carrying the numbers written, and nothing
// from fields its API does not have.
func FuzzPodGroup(f *testing.F) {
	for _, seed := range []struct {
		api         API
		spec        string
		annotations map[string]string
	}{
		{api: Coscheduling, spec: `{"minMember":6,"scheduleTimeoutSeconds":90,"minResources":{"nvidia.com/gpu":"10"}}`},
		{api: Coscheduling, spec: `{"minMember":6,"scheduleTimeoutSeconds":0}`},
		{api: Coscheduling, spec: `{"minMember":2,"scheduleTimeoutSeconds":9223372036}`},
		{api: Coscheduling, spec: `{"minMember":2,"scheduleTimeoutSeconds":9223372037}`},
		{api: Coscheduling, spec: `{"minMember":2,"scheduleTimeoutSeconds":18446744074}`},
		{api: Coscheduling, spec: `{"minMember":2,"scheduleTimeoutSeconds":1e15}`},
		{api: Coscheduling, spec: `{"minMember":2.0,"scheduleTimeoutSeconds":null}`},
		{api: Coscheduling, spec: `{"minMember":2.5}`},
		{api: Coscheduling, spec: `{"minMember":9007199254740993}`},
		{api: Coscheduling, spec: `{"minMember":1e300}`},
		{api: Coscheduling, spec: `{"minMember":"2"}`},
		{api: Coscheduling, spec: `"minMember"`},
		{api: Coscheduling, spec: `null`},
		{api: Volcano, spec: `{"minMember":5,"minTaskMember":{"ps":1,"worker":4,"chief":0},"queue":"default"}`},
		{api: Volcano, spec: `{"minMember":5,"minTaskMember":{"worker":-1}}`},
		{api: Volcano, spec: `{"minMember":5,"minTaskMember":[1]}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"highestTierAllowed":2}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"mode":"soft","highestTierName":"rack"}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"mode":"hard","highestTierAllowed":1,"highestTierName":"rack"}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"mode":"strict","highestTierAllowed":0}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"mode":5}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":{"highestTierName":7}}`},
		{api: Volcano, spec: `{"minMember":4,"networkTopology":"rack"}`},
		{api: KubeBatch, spec: `{"minMember":3,"minTaskMember":{"ps":1},"scheduleTimeoutSeconds":5}`},
		{api: KubeBatchV1alpha2, spec: `{"minMember":3,"queue":"research"}`},
		{api: KubeBatchV1alpha2, spec: `{"minMember":3,"queue":7}`},
		{api: Volcano, spec: `{"minMember":3,"queue":null}`},
		{api: KubeBatchV1alpha2, spec: `{}`},
		{api: Koordinator, spec: `{"minMember":2,"scheduleTimeoutSeconds":30}`, annotations: map[string]string{
			wellknown.AnnotationGangGroups: `["team-a/job-1","team-a/ps"]`, wellknown.AnnotationGangMode: "NonStrict", wellknown.AnnotationGangTotalNumber: "3"}},
		{api: Koordinator, spec: `{"minMember":2}`, annotations: map[string]string{
			wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}`}},
		{api: Koordinator, spec: `{"minMember":2}`, annotations: map[string]string{
			wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":"BlockLayer"}`, wellknown.AnnotationGangMatchPolicy: "only-waiting"}},
		{api: Koordinator, spec: `{"minMember":4}`, annotations: map[string]string{wellknown.AnnotationGangTotalNumber: "3"}},
		// Koordinator reads these on pods only; on the object they are not its to read.
		{api: Koordinator, spec: `{"minMember":2}`, annotations: map[string]string{wellknown.AnnotationGangMinAvailable: "x", wellknown.AnnotationGangWaitingTime: "x"}},
	} {
		index := slices.IndexFunc(minMemberAPIs(), func(a API) bool { return a.Resource == seed.api.Resource })
		f.Add(uint8(index), seed.spec, markersText(nil, seed.annotations), true)
		f.Add(uint8(index), seed.spec, markersText(nil, seed.annotations), false)
	}
	f.Fuzz(func(t *testing.T, which uint8, specJSON, annotationText string, dynamicNumbers bool) {
		apis := minMemberAPIs()
		api := apis[int(which)%len(apis)]
		var spec any
		decode := stdjson.Unmarshal
		if dynamicNumbers {
			decode = utiljson.Unmarshal
		}
		if decode([]byte(specJSON), &spec) != nil {
			return
		}
		_, annotations := markers(annotationText)
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		obj.SetAPIVersion(api.Resource.GroupVersion().String())
		obj.SetKind("PodGroup")
		obj.SetNamespace("team-a")
		obj.SetName("job-1")
		obj.SetAnnotations(annotations)

		got, err := api.Parse(obj)
		if err != nil {
			require.Nil(t, got)
			checkGroupRefusal(t, api, annotations, err)
			return
		}
		checkSpec(t, got, "team-a", "job-1")
		require.Contains(t, got.Source, api.Object("team-a", "job-1"))
		require.Contains(t, got.Source, api.Resource.GroupVersion().String())
		fields := spec.(map[string]any) // minMember was read: spec is an object
		require.Equal(t, max(number(t, fields["minMember"]), 1), float64(got.MinAvailable), "minMember %v (0 asks for no quorum)", fields["minMember"])

		reads := groupFields[api.Resource.Group]
		if secs, ok := fields["scheduleTimeoutSeconds"]; ok && secs != nil && reads["spec.scheduleTimeoutSeconds"] {
			require.Equal(t, number(t, secs), got.WaitingTime.Seconds(), "scheduleTimeoutSeconds %v", secs)
		} else {
			require.Zero(t, got.WaitingTime)
		}
		if !reads["spec.minTaskMember"] {
			require.Nil(t, got.MinPerTask)
		}
		for task, n := range got.MinPerTask {
			require.Equal(t, number(t, fields["minTaskMember"].(map[string]any)[task]), float64(n), "task %q", task)
		}
		if api.Resource.Group == Koordinator.Resource.Group {
			checkKoordinatorOptions(t, got, annotations)
		} else {
			require.Zero(t, got.TotalNumber)
			require.Nil(t, got.Bundle)
			require.Empty(t, got.Mode)
			require.Equal(t, gangspec.WaitingAndRunning, got.Policy)
		}
		checkQueueRef(t, api, fields, got.Queue)
		if reads["spec.networkTopology"] && (got.Topology.Tier != 0 || got.Topology.Key != "") {
			nt := fields["networkTopology"].(map[string]any)
			require.Equal(t, nt["mode"] != "soft", got.Topology.Required, "mode %v", nt["mode"])
			if got.Topology.Tier != 0 {
				require.Equal(t, number(t, nt["highestTierAllowed"]), float64(got.Topology.Tier))
			} else {
				require.Equal(t, nt["highestTierName"], got.Topology.Key)
			}
		} else if api.Resource.Group != Koordinator.Resource.Group {
			require.Zero(t, got.Topology.Tier)
			require.Empty(t, got.Topology.Key)
			require.Nil(t, got.Topology.Layers)
		}
	})
}

// minMemberAPIs are the PodGroups that grew from kube-batch's, whose quorum is spec.minMember;
// FuzzWorkloadGroup covers the others.
func minMemberAPIs() []API {
	return slices.DeleteFunc(APIs(), func(a API) bool { return a.quorum != nil })
}

// FuzzWorkloadGroup reads any object as each group API whose quorum is not spec.minMember: a
// Kubernetes PodGroup, a Kueue Workload, a KAI Scheduler PodGroup. A refusal is a FieldError naming
// the object; an accepted object is a gang the manager can use, a Kubernetes PodGroup's topology
// is required and names the keys written, and a KAI PodGroup's quorum is its subgroups'.
func FuzzWorkloadGroup(f *testing.F) {
	for _, seed := range []struct {
		api     API
		content string
	}{
		{Native, `{"spec":{"schedulingPolicy":{"gang":{"minCount":4}}}}`},
		{Native, `{"spec":{"schedulingPolicy":{"basic":{}}}}`},
		{Native, `{"spec":{"schedulingPolicy":{"gang":{"minCount":2},"basic":{}}}}`},
		{Native, `{"spec":{"schedulingPolicy":{"gang":{"minCount":2}},"schedulingConstraints":{"topology":[{"key":"rack"},{"key":"block"}]}}}`},
		{Native, `{"spec":{"schedulingPolicy":{"gang":{"minCount":2}},"schedulingConstraints":{"topology":[7]}}}`},
		{KueueWorkload, `{"spec":{"podSets":[{"name":"main","count":4},{"name":"l"}]},"status":{"admission":{"podSetAssignments":[{"name":"main","count":2}]}}}`},
		{KueueWorkload, `{"spec":{"podSets":[{"name":"main","count":-1}]}}`},
		{KueueWorkload, `{"spec":{"podSets":"main"}}`},
		{KAI, `{"spec":{"minMember":4,"queue":"team-a","priorityClassName":"train","preemptibility":"non-preemptible"}}`},
		{KAI, `{"spec":{"minMember":0}}`},
		{KAI, `{"spec":{}}`},
		{KAI, `{"spec":{"minMember":-1,"queue":7}}`},
		{KAI, `{"spec":{"minMember":2,"minSubGroup":1}}`},
		{KAI, `{"spec":{"minMember":8,"topologyConstraint":{"topology":"t","requiredTopologyLevel":"rack","preferredTopologyLevel":"kubernetes.io/hostname"}}}`},
		{KAI, `{"spec":{"topologyConstraint":{"topology":"t"}}}`},
		{KAI, `{"spec":{"topologyConstraint":{"requiredTopologyLevel":"rack"},"preemptibility":"sometimes"}}`},
		{KAI, `{"spec":{"minMember":5,"subGroups":[{"name":"leader","minMember":1},{"name":"workers","minMember":4}]}}`},
		{KAI, `{"spec":{"subGroups":[{"name":"r0","minMember":9},{"name":"prefill","parent":"r0","minMember":2},{"name":"decode","parent":"r0","minMember":3}]}}`},
		{KAI, `{"spec":{"minSubGroup":2,"subGroups":[{"name":"r","minSubGroup":1},{"name":"w","parent":"r","minMember":2},{"name":"x","minMember":1}]}}`},
		{KAI, `{"spec":{"subGroups":[{"name":"b","minSubGroup":0},{"name":"a","parent":"b","minMember":2},{"name":"c","parent":"b","minMember":2}]}}`},
		{KAI, `{"spec":{"minSubGroup":1,"subGroups":[{"name":"a","minMember":1},{"name":"b","minMember":1}]}}`},
		{KAI, `{"spec":{"subGroups":[{"name":"a","parent":"b","minMember":1},{"name":"b","parent":"a","minMember":1}]}}`},
		{KAI, `{"spec":{"subGroups":[{"name":"a","parent":"ghost","minMember":1},{"name":"a","minMember":2}]}}`},
		{KAI, `{"spec":{"subGroups":[{"name":"a"},{"minMember":1},{"name":"c","minMember":"2","minSubGroup":1}]}}`},
		{KAI, `{"spec":{"topologyConstraint":{"topology":"t","requiredTopologyLevel":"rack"},"subGroups":[{"name":"w","minMember":2,"topologyConstraint":{"topology":"t","requiredTopologyLevel":"rack"}},{"name":"x","minMember":1,"topologyConstraint":{"topology":"t","requiredTopologyLevel":"block"}}]}}`},
		{KAI, `{"spec":{"subGroups":"leader"}}`},
	} {
		index := slices.IndexFunc(ownQuorumAPIs(), func(a API) bool { return a.Resource == seed.api.Resource })
		f.Add(uint8(index), seed.content)
	}
	f.Fuzz(func(t *testing.T, which uint8, content string) {
		apis := ownQuorumAPIs()
		api := apis[int(which)%len(apis)]
		var obj map[string]any
		if utiljson.Unmarshal([]byte(content), &obj) != nil || obj == nil {
			return
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace("team-a")
		u.SetName("job-1")
		got, err := api.Parse(u)
		if err != nil {
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(err, &fieldErr), "want a FieldError, got %T: %v", err, err)
			require.Equal(t, api.Object("team-a", "job-1"), fieldErr.Object)
			require.NotEmpty(t, fieldErr.Reason)
			return
		}
		checkSpec(t, got, "team-a", "job-1")
		switch api.Resource.Group {
		case Native.Resource.Group:
			if got.Topology.Key != "" || got.Topology.Layers != nil {
				require.True(t, got.Topology.Required)
			}
		case KAI.Resource.Group:
			spec, _ := obj["spec"].(map[string]any) // nil when absent: a PodGroup that says nothing
			checkKAISpec(t, spec, got)
		}
	})
}

// ownQuorumAPIs are the group APIs whose quorum is not spec.minMember alone; FuzzPodGroup covers
// the others.
func ownQuorumAPIs() []API {
	return slices.DeleteFunc(APIs(), func(a API) bool { return a.quorum == nil })
}

// checkKAISpec holds an accepted KAI PodGroup to what it wrote: without subgroups its minMember
// (1 for absent or 0); with them a quorum per pod set it names, their sum the gang's; its queue;
// its one topology level, required when it names a required one.
func checkKAISpec(t *testing.T, spec map[string]any, got *gangspec.Spec) {
	parts, _ := spec["subGroups"].([]any)
	if len(parts) == 0 {
		require.Nil(t, got.MinPerTask)
		want := 1.0
		if n, ok := spec["minMember"]; ok && n != nil {
			want = max(number(t, n), 1)
		}
		require.Equal(t, want, float64(got.MinAvailable))
	} else {
		names := map[string]bool{}
		for _, p := range parts {
			names[p.(map[string]any)["name"].(string)] = true
		}
		for task := range got.MinPerTask {
			require.True(t, names[task], "task quorum %q names no subgroup", task)
		}
		if got.MinPerTask != nil {
			require.Equal(t, quorumTotal(got.MinPerTask), got.MinAvailable)
		} else {
			require.Equal(t, 1, got.MinAvailable)
		}
	}
	if name, _ := spec["queue"].(string); name != "" {
		require.Equal(t, quota.Ref{Kind: KindKAIQueue, Name: name}, got.Queue)
	} else {
		require.Equal(t, quota.Ref{}, got.Queue)
	}
	tc, _ := spec["topologyConstraint"].(map[string]any)
	required, _ := tc["requiredTopologyLevel"].(string)
	preferred, _ := tc["preferredTopologyLevel"].(string)
	switch topology, _ := tc["topology"].(string); {
	case topology == "":
		require.Equal(t, gangspec.Topology{}, got.Topology)
	case required != "":
		require.Equal(t, gangspec.Topology{Key: required, Required: true, Source: got.Topology.Source}, got.Topology)
	default:
		require.Equal(t, gangspec.Topology{Key: preferred, Source: got.Topology.Source}, got.Topology)
	}
}

// checkQueueRef holds the queue an accepted group names to its spec.queue: Volcano's and
// kube-batch's name a queue of their kind, falling back to the default; other dialects none.
func checkQueueRef(t *testing.T, api API, fields map[string]any, got quota.Ref) {
	kind := map[string]string{Volcano.Resource.Group: KindVolcanoQueue, KubeBatch.Resource.Group: KindKubeBatchQueue,
		KubeBatchV1alpha2.Resource.Group: KindKubeBatchQueue}[api.Resource.Group]
	if kind == "" {
		require.Equal(t, quota.Ref{}, got)
		return
	}
	name, _ := fields["queue"].(string)
	require.Equal(t, quota.Ref{Kind: kind, Name: name, Fallback: quota.DefaultName}, got)
}

// groupFields are the spec fields each API reads, by API group, as refusals name them.
var groupFields = map[string]map[string]bool{
	Coscheduling.Resource.Group:      {"spec.minMember": true, "spec.scheduleTimeoutSeconds": true},
	Koordinator.Resource.Group:       {"spec.minMember": true, "spec.scheduleTimeoutSeconds": true},
	Volcano.Resource.Group:           {"spec.minMember": true, "spec.minTaskMember": true, "spec.networkTopology": true, "spec.queue": true},
	KubeBatch.Resource.Group:         {"spec.minMember": true, "spec.queue": true},
	KubeBatchV1alpha2.Resource.Group: {"spec.minMember": true, "spec.queue": true},
}

// checkGroupRefusal holds a refusal of a PodGroup to naming the object and a field its API reads.
func checkGroupRefusal(t *testing.T, api API, annotations map[string]string, err error) {
	var fieldErr *gangspec.FieldError
	require.True(t, errors.As(err, &fieldErr), "want a FieldError, got %T: %v", err, err)
	require.Equal(t, api.Object("team-a", "job-1"), fieldErr.Object)
	require.NotEmpty(t, fieldErr.Reason)
	if key, ok := strings.CutPrefix(fieldErr.Field, "annotation "); ok {
		require.Equal(t, Koordinator.Resource, api.Resource, "only Koordinator reads annotations on its PodGroup: %v", err)
		require.True(t, markerKeys[fieldErr.Field], "refusal names %q, which lockstep does not read", fieldErr.Field)
		require.Equal(t, annotations[key], fieldErr.Value)
		return
	}
	reads := groupFields[api.Resource.Group]
	field := fieldErr.Field
	for !reads[field] && strings.Count(field, ".") > 1 {
		field = field[:strings.LastIndex(field, ".")]
	}
	require.True(t, reads[field], "%s refuses field %q, which it does not read: %v", api.Dialect, fieldErr.Field, err)
}

// number is a decoded JSON number of either decoder as a float64, to compare with what was read;
// every number a reader accepts is whole and below 2^53, where float64 is exact.
func number(t *testing.T, v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	t.Fatalf("%v (%T) is no number", v, v)
	return math.NaN()
}

// queueFields are the fields each queue API reads, by kind and group, as refusals name them.
var queueFields = map[schema.GroupVersionResource][]string{
	VolcanoQueue.Resource:           {"spec.weight", "spec.capability", "spec.guarantee.resource", "spec.reclaimable", "spec.priority", "status.state"},
	KubeBatchQueue.Resource:         {"spec.weight", "spec.capability"},
	KubeBatchQueueV1alpha2.Resource: {"spec.weight", "spec.capability"},
	ElasticQuota.Resource:           {"spec.min", "spec.max"},
	KoordinatorElasticQuota.Resource: {"spec.min", "spec.max", "metadata.annotations." + wellknown.AnnotationKoordinatorQuotaNamespaces,
		"metadata.annotations." + wellknown.AnnotationKoordinatorQuotaSharedWeight},
	KAIQueue.Resource: {"spec.parentQueue", "spec.priority", "spec.resources"},
}

// FuzzQueue reads any spec and status as a queue object of each API lockstep reads, its numbers
// decoded either way (see FuzzPodGroup). Whoever may create a Queue or an ElasticQuota writes
// them, and a queue's gangs wait on what is read. It checks: Parse never panics and always names
// the queue; a refusal is a FieldError naming the object and a field this API reads, and keeps
// nothing it read; an accepted queue carries the numbers written, within the bounds the quota
// arithmetic relies on, and nothing from fields its API does not have.
func FuzzQueue(f *testing.F) {
	for _, seed := range []struct {
		api          QueueAPI
		spec, status string
	}{
		{VolcanoQueue, `{"weight":3,"capability":{"nvidia.com/gpu":"8","cpu":"64","memory":"512Gi"},"guarantee":{"resource":{"nvidia.com/gpu":4}},"reclaimable":false,"priority":2}`, `{"state":"Open"}`},
		{VolcanoQueue, `{"capability":{"cpu":0,"memory":"0","nvidia.com/gpu":"0"}}`, `{"state":"Closing"}`},
		{VolcanoQueue, `{"capability":{"nvidia.com/gpu":"4"},"guarantee":{"resource":{"nvidia.com/gpu":"6"}}}`, `{}`},
		{VolcanoQueue, `{"weight":-1,"capability":{"cpu":"1e21"}}`, `{"state":"Draining"}`},
		{VolcanoQueue, `{"capability":{"nvidia.com/gpu":"2.5","memory":1e300},"reclaimable":"yes"}`, `null`},
		{VolcanoQueue, `{"priority":4294967296,"guarantee":"all"}`, `{"state":7}`},
		{KubeBatchQueue, `{"weight":1}`, ``},
		{KubeBatchQueueV1alpha2, `{"weight":2147483648,"capability":{"cpu":"-1"}}`, `{}`},
		{ElasticQuota, `{"min":{"nvidia.com/gpu":"2","cpu":"8"},"max":{"nvidia.com/gpu":"6","cpu":"16","memory":"64Gi"}}`, `{"used":{"cpu":"1"}}`},
		{ElasticQuota, `{"min":{"memory":"2Gi"},"max":{"memory":"1Gi"}}`, ``},
		{ElasticQuota, `{"max":{"nvidia.com/gpu":0.5,"cpu":null}}`, ``},
		{KoordinatorElasticQuota, `{"min":{"nvidia.com/gpu":"2"},"max":{"nvidia.com/gpu":"6","cpu":"16"}}`, `{"used":{"cpu":"1"}}`},
		{KoordinatorElasticQuota, `{"max":{"cpu":"2500m"}}`, ``},
		{KoordinatorElasticQuota, `{"max":{"nvidia.com/gpu":1e18}}`, ``},
		{KAIQueue, `{"parentQueue":"dept","priority":200,"resources":{"gpu":{"quota":4,"limit":-1,"overQuotaWeight":3},"cpu":{"quota":-1,"limit":-1},"memory":{"quota":-1,"limit":-1}}}`, ``},
		{KAIQueue, `{"resources":{"gpu":{"quota":6,"limit":4}}}`, ``},
		{KAIQueue, `{"resources":{"gpu":{"quota":0.5},"cpu":{"limit":-2}}}`, ``},
		{KAIQueue, `{"parentQueue":"gpu"}`, ``},
	} {
		index := slices.IndexFunc(QueueAPIs(), func(a QueueAPI) bool { return a.Resource == seed.api.Resource })
		f.Add(uint8(index), seed.spec, seed.status, true)
		f.Add(uint8(index), seed.spec, seed.status, false)
	}
	f.Fuzz(func(t *testing.T, which uint8, specJSON, statusJSON string, dynamicNumbers bool) {
		apis := QueueAPIs()
		api := apis[int(which)%len(apis)]
		decode := stdjson.Unmarshal
		if dynamicNumbers {
			decode = utiljson.Unmarshal
		}
		obj := &unstructured.Unstructured{Object: map[string]any{}}
		for field, text := range map[string]string{"spec": specJSON, "status": statusJSON} {
			var v any
			if text != "" && decode([]byte(text), &v) != nil {
				return
			}
			if text != "" {
				obj.Object[field] = v
			}
		}
		obj.SetNamespace("team-a")
		obj.SetName("gpu")

		got := api.Parse(obj)
		require.Equal(t, got, api.Parse(obj), "the same object reads the same twice")
		base := api.base("team-a", "gpu")
		require.Equal(t, api.Key("team-a", "gpu"), got.Key())
		require.Equal(t, base.Source, got.Source)
		require.Equal(t, base.Namespace, got.Namespace)
		require.Equal(t, api.pool, got.BorrowsOnlyMin)
		if got.Err != nil {
			checkQueueRefusal(t, api, got.Err)
			base.Err = got.Err
			require.Equal(t, base, got, "a refused queue keeps nothing it read")
			return
		}
		spec, _ := obj.Object["spec"].(map[string]any)
		if api.Resource == KAIQueue.Resource {
			checkKAIQueue(t, spec, got)
			return
		}
		checkQueue(t, api, spec, got)
	})
}

// checkKAIQueue holds an accepted KAI Queue to its own shape: limits under spec.resources, quotas
// as what it deserves, never above the limit, and a parent other than itself.
func checkKAIQueue(t *testing.T, spec map[string]any, got quota.Queue) {
	require.GreaterOrEqual(t, got.Weight, int64(1))
	require.LessOrEqual(t, got.Weight, int64(math.MaxInt32))
	require.True(t, got.WeighsOverQuota)
	require.NotEqual(t, "gpu", got.Parent, "a queue is not its own parent")
	if _, written := spec["priority"]; !written {
		require.Equal(t, int32(100), got.Priority, "KAI's default priority")
	}
	require.Zero(t, got.Guarantee)
	for _, res := range countedResources {
		amount := got.Capability.Amount.Get(res.name)
		require.True(t, amount >= 0 && amount <= MaxQuantity, "%s %d", res.name, amount)
		require.GreaterOrEqual(t, got.Min.Get(res.name), int64(0))
		if got.Capability.Named.Has(res.bit) {
			require.LessOrEqual(t, got.Min.Get(res.name), amount, "quota above limit")
		}
	}
	require.Zero(t, got.Capability.Named&^quota.Counted)
}

// checkQueueRefusal holds a refused queue object to naming itself and a field its API reads.
func checkQueueRefusal(t *testing.T, api QueueAPI, err error) {
	var fieldErr *gangspec.FieldError
	require.True(t, errors.As(err, &fieldErr), "want a FieldError, got %T: %v", err, err)
	require.Equal(t, api.Object("team-a", "gpu"), fieldErr.Object)
	require.NotEmpty(t, fieldErr.Reason)
	read := slices.ContainsFunc(queueFields[api.Resource], func(f string) bool {
		return fieldErr.Field == f || strings.HasPrefix(fieldErr.Field, f+".")
	})
	require.True(t, read, "%s refuses field %q, which it does not read: %v", api.Kind, fieldErr.Field, err)
}

// checkQueue holds an accepted queue to the numbers written and to the bounds quota relies on.
func checkQueue(t *testing.T, api QueueAPI, spec map[string]any, got quota.Queue) {
	require.GreaterOrEqual(t, got.Weight, int64(1))
	require.LessOrEqual(t, got.Weight, int64(math.MaxInt32))
	if w, ok := spec["weight"]; ok && w != nil && !api.Namespaced && number(t, w) != 0 {
		require.Equal(t, number(t, w), float64(got.Weight))
	} else if api.Resource == KoordinatorElasticQuota.Resource {
		// No shared-weight annotation: spec.max's GPUs, else its cores, at least 1.
		want := int64(1)
		if c := got.Capability.Amount; c.GPU > 0 {
			want = min(c.GPU, math.MaxInt32)
		} else if c.MilliCPU >= 1000 {
			want = min(c.MilliCPU/1000, math.MaxInt32)
		}
		require.Equal(t, want, got.Weight)
	} else {
		require.Equal(t, int64(1), got.Weight, "no weight written, or none read (ElasticQuota)")
	}
	require.Contains(t, []quota.State{quota.Open, quota.Closed, quota.Closing, quota.Unknown}, got.State)
	if api.Resource != VolcanoQueue.Resource {
		require.Equal(t, quota.Open, got.State)
		require.True(t, got.Reclaimable)
		require.Zero(t, got.Priority)
		require.Zero(t, got.Guarantee)
	}
	if !api.Namespaced {
		require.Zero(t, got.Min)
	}
	limitField := map[bool]string{false: "capability", true: "max"}[api.Namespaced]
	written, _ := spec[limitField].(map[string]any)
	for _, res := range countedResources {
		amount := got.Capability.Amount.Get(res.name)
		require.True(t, amount >= 0 && amount <= MaxQuantity, "%s %d", res.name, amount)
		require.True(t, got.Guarantee.Get(res.name) >= 0 && got.Min.Get(res.name) >= 0)
		raw, named := written[string(res.name)]
		named = named && raw != nil
		if api.Resource == VolcanoQueue.Resource && res.name != wellknown.ResourceGPU && named && amount == 0 {
			named = false // Volcano: a cpu or memory capability of 0 is none
		}
		require.Equal(t, named, got.Capability.Named.Has(res.bit), "%s of %v", res.name, written)
		if named {
			require.Equal(t, writtenAmount(t, res.name, raw), amount, "%s %v", res.name, raw)
		} else {
			require.Zero(t, amount)
		}
		if got.Capability.Named.Has(res.bit) {
			require.LessOrEqual(t, got.Guarantee.Get(res.name), amount, "guarantee above capability")
			require.LessOrEqual(t, got.Min.Get(res.name), amount, "min above max")
		}
	}
	require.Zero(t, got.Capability.Named&^quota.Counted)
}

// writtenAmount is a quantity as written, in lockstep's unit, read without dialect's helpers.
func writtenAmount(t *testing.T, name corev1.ResourceName, raw any) int64 {
	text := fmt.Sprint(raw)
	if f, ok := raw.(float64); ok {
		text = strconv.FormatFloat(f, 'f', -1, 64)
	}
	q := resource.MustParse(text)
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
