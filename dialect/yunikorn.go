package dialect

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Read against apache/yunikorn-k8shim at 23b6b47f (August 2026; YuniKorn 1.9): pkg/common/constants,
// pkg/common/utils/utils.go (GetApplicationIDFromPod, GetQueueNameFromPod, GenerateApplicationID),
// pkg/cache/utils.go (GetTaskGroupsFromAnnotation), pkg/cache/gang_utils.go
// (GetSchedulingPolicyParam), pkg/cache/application.go; and apache/yunikorn-core at be3bb487,
// pkg/scheduler/objects/application.go (the placeholder timeout and the gang styles).

// KindYuniKornQueue is a queue of YuniKorn's queues.yaml, as quota.Ref names it.
const KindYuniKornQueue = "YuniKorn queue"

// The values YuniKorn gives what a pod leaves out.
const (
	// yunikornDefaultTimeout is yunikorn-core's defaultPlaceholderTimeout, taken for an absent or 0
	// placeholderTimeoutInSeconds.
	yunikornDefaultTimeout = 15 * time.Minute
	yunikornDefaultStyle   = "Soft"
	// yunikornUniqueAutogen ends the app id YuniKorn's admission controller writes when asked for
	// one application per pod; the shim puts the pod's UID in its place.
	yunikornUniqueAutogen = "-uniqueautogen"
)

// yunikornSource is every YuniKorn gang's source: members of one application that disagree are
// refused on the values, not on where they were read.
const yunikornSource = "YuniKorn task groups"

// yunikorn reads a YuniKorn gang: an application whose pods carry task groups. The gang is the
// application, in the pod's namespace, and the pod's task group is its task. A pod of an
// application without task groups is an ordinary pod, as YuniKorn schedules it.
func yunikorn(p podMarkers) (claim, bool) {
	groups := p.annotations[wellknown.AnnotationYuniKornTaskGroups]
	task := p.annotations[wellknown.AnnotationYuniKornTaskGroupName]
	if groups == "" && task == "" {
		return claim{}, false // YuniKorn takes an empty value as none
	}
	marker := annotationMarker(wellknown.AnnotationYuniKornTaskGroups, groups)
	if task != "" {
		marker = annotationMarker(wellknown.AnnotationYuniKornTaskGroupName, task)
	}
	c := claim{marker: marker, membership: gangspec.Membership{Gang: yunikornAppID(p), Task: task}}
	c.membership.Spec, c.membership.Err = yunikornSpec(p, c.membership.Gang, groups, task)
	return c, true
}

// yunikornAppID is the pod's application in YuniKorn's order of keys. A pod that names none is in
// its namespace's generated application, as the shim makes it by default (generateUniqueAppIds
// off); the id the admission controller writes to ask for one application per pod becomes the
// pod's own, with its UID.
func yunikornAppID(p podMarkers) string {
	app := firstValue(p.labels, wellknown.LabelYuniKornAppID)
	if app == "" {
		app = firstValue(p.annotations, wellknown.AnnotationYuniKornAppID)
	}
	if app == "" && yunikornPod(p) {
		app = firstValue(p.labels, wellknown.LabelYuniKornAppIDLegacy, wellknown.LabelSparkAppSelector)
	}
	if app == "" {
		return fmt.Sprintf("%.63s", "yunikorn-"+p.namespace+"-autogen")
	}
	if prefix, ok := strings.CutSuffix(app, yunikornUniqueAutogen); ok {
		return prefix + "-" + p.uid
	}
	return app
}

// yunikornPod reports whether YuniKorn would read the pod's unprefixed legacy keys (applicationId,
// spark-app-selector, queue): it reads them only on pods that name it as their scheduler. Pods
// moved to lockstep may name another, so any yunikorn.apache.org key makes the pod YuniKorn's too;
// a bare "queue" label on someone else's pod names no YuniKorn queue.
func yunikornPod(p podMarkers) bool {
	if p.schedulerName == wellknown.SchedulerNameYuniKorn {
		return true
	}
	for _, key := range []string{wellknown.LabelYuniKornAppID, wellknown.LabelYuniKornQueue} {
		if _, ok := p.labels[key]; ok {
			return true
		}
	}
	for _, key := range []string{wellknown.AnnotationYuniKornAppID, wellknown.AnnotationYuniKornQueue,
		wellknown.AnnotationYuniKornTaskGroups, wellknown.AnnotationYuniKornTaskGroupName} {
		if _, ok := p.annotations[key]; ok {
			return true
		}
	}
	return false
}

// yunikornPodQueue is the YuniKorn queue of a YuniKorn pod: the one it names, in YuniKorn's order
// of keys (label, annotation, legacy label), else its namespace's, placed as YuniKorn places it
// (YuniKornPodQueue). Such queues are made on demand where the file does not define them.
func yunikornPodQueue(p podMarkers) (quota.Ref, bool) {
	if !yunikornPod(p) {
		return quota.Ref{}, false
	}
	name := firstValue(p.labels, wellknown.LabelYuniKornQueue)
	if name == "" {
		name = firstValue(p.annotations, wellknown.AnnotationYuniKornQueue)
	}
	if name == "" {
		name = firstValue(p.labels, wellknown.LabelYuniKornQueueLegacy)
	}
	return quota.Ref{Kind: KindYuniKornQueue, Name: YuniKornPodQueue(p.namespace, name)}, true
}

// firstValue is the first non-empty value of keys: YuniKorn takes an empty value as none.
func firstValue(values map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := values[k]; v != "" {
			return v
		}
	}
	return ""
}

// yunikornSpec reads the gang's rules off one member. Every member must carry the application's
// task groups: YuniKorn reads them off the first pod it sees, lockstep off each member, and a
// member whose rules differ from its gang's is refused naming both (gangspec.Disagreement).
func yunikornSpec(p podMarkers, app, groups, task string) (*gangspec.Spec, error) {
	a := annotations{object: p.object(), values: p.annotations}
	if groups == "" {
		return nil, a.bad(wellknown.AnnotationYuniKornTaskGroupName, "names a task group, and the pod carries no annotation "+
			wellknown.AnnotationYuniKornTaskGroups+": lockstep reads the task groups on every member, so give each pod of the application the annotation")
	}
	quorums, err := a.taskGroups(groups)
	if err != nil {
		return nil, err
	}
	if _, ok := quorums[task]; task != "" && !ok {
		return nil, a.bad(wellknown.AnnotationYuniKornTaskGroupName, "is not one of the task groups annotation "+wellknown.AnnotationYuniKornTaskGroups+" lists")
	}
	// After its quorum was placed, YuniKorn creates no placeholders again: later pods of the
	// application schedule as ordinary pods, which once-satisfied says.
	spec := &gangspec.Spec{Namespace: p.namespace, Name: app, MinAvailable: quorumTotal(quorums), MinPerTask: quorums,
		Policy: gangspec.OnceSatisfied, Source: yunikornSource,
		QuorumFrom: "the minMember of the task groups in annotation " + wellknown.AnnotationYuniKornTaskGroups + " of the members"}
	if err := a.yunikornPolicy(spec); err != nil {
		return nil, err
	}
	if q, ok := yunikornPodQueue(p); ok {
		spec.Queue = q // the application's: its members must agree on it
	}
	return spec, nil
}

// yunikornTaskGroup is the part of a task group lockstep reads, typed as the shim's TaskGroup so
// that what the shim cannot decode is refused here too. minResource, nodeSelector, tolerations,
// affinity, topologySpreadConstraints, labels and annotations shape YuniKorn's placeholder pods;
// lockstep reserves for the real members, with their own requests and constraints, and has no
// placeholders.
type yunikornTaskGroup struct {
	Name      string `json:"name"`
	MinMember *int32 `json:"minMember"`
}

// taskGroups reads the task-groups annotation as each group's quorum, refusing what YuniKorn
// refuses (a group without a name or with fewer than one member) and what it would read
// ambiguously (a name listed twice).
func (a annotations) taskGroups(raw string) (map[string]int, error) {
	const key = wellknown.AnnotationYuniKornTaskGroups
	var list []yunikornTaskGroup
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "minMember" {
			return nil, a.bad(key, "minMember must be a whole number from 1 to 2147483647, not "+typeErr.Value)
		}
		return nil, a.bad(key, `must be a JSON list of task groups such as [{"name":"workers","minMember":4,"minResource":{"cpu":"1"}}]: `+err.Error())
	}
	if len(list) == 0 {
		return nil, a.bad(key, "lists no task groups; remove the annotation for an application that is no gang")
	}
	quorums := make(map[string]int, len(list))
	for i, g := range list {
		switch _, dup := quorums[g.Name]; {
		case g.Name == "":
			return nil, a.bad(key, fmt.Sprintf("task group %d has no name", i))
		case dup:
			return nil, a.bad(key, fmt.Sprintf("task group %q is listed twice", g.Name))
		case g.MinMember == nil:
			return nil, a.bad(key, fmt.Sprintf("task group %q has no minMember", g.Name))
		case *g.MinMember < 1:
			return nil, a.bad(key, fmt.Sprintf("task group %q: minMember %d must be at least 1, as YuniKorn requires", g.Name, *g.MinMember))
		}
		quorums[g.Name] = int(*g.MinMember)
	}
	return quorums, nil
}

// yunikornPolicy reads schedulingPolicyParameters: key=value pairs separated by spaces, as the
// shim splits them. YuniKorn skips a pair it cannot read and takes its default for a value it
// cannot read; lockstep refuses both, naming them.
//   - placeholderTimeoutInSeconds is how long the gang's reservation lives before its quorum:
//     lockstep's waiting time. 0 or absent is YuniKorn's 15 minutes.
//   - gangSchedulingStyle, Soft (the default) or Hard, says what YuniKorn does at the timeout:
//     schedule the pods one by one, or fail the application. lockstep does neither: the gang's
//     reservation expires and it tries again after a waiting time, never placing part of it. The
//     style is kept as the gang's mode, shown, and all members must agree on it.
func (a annotations) yunikornPolicy(spec *gangspec.Spec) error {
	const key = wellknown.AnnotationYuniKornSchedulingPolicy
	spec.WaitingTime, spec.Mode = yunikornDefaultTimeout, yunikornDefaultStyle
	seen := map[string]bool{}
	for _, pair := range strings.Split(a.values[key], " ") {
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		switch {
		case !ok || strings.Contains(value, "="):
			return a.bad(key, fmt.Sprintf("%q is not key=value (pairs are separated by spaces)", pair))
		case seen[name]:
			return a.bad(key, name+" is given twice")
		}
		seen[name] = true
		if err := a.yunikornParameter(spec, name, value); err != nil {
			return err
		}
	}
	return nil
}

func (a annotations) yunikornParameter(spec *gangspec.Spec, name, value string) error {
	const key = wellknown.AnnotationYuniKornSchedulingPolicy
	switch name {
	case "placeholderTimeoutInSeconds":
		secs, err := strconv.ParseInt(value, 10, 64)
		switch maxSecs := int64(math.MaxInt64 / time.Second); {
		case err != nil:
			return a.bad(key, fmt.Sprintf("placeholderTimeoutInSeconds %q must be whole seconds", value))
		case secs < 0:
			return a.bad(key, fmt.Sprintf("placeholderTimeoutInSeconds %d must not be negative (0 or absent takes YuniKorn's 900)", secs))
		case secs > maxSecs:
			return a.bad(key, fmt.Sprintf("placeholderTimeoutInSeconds %d must be at most %d (292 years)", secs, maxSecs))
		case secs > 0:
			spec.WaitingTime = time.Duration(secs) * time.Second
		}
	case "gangSchedulingStyle":
		if value != "Soft" && value != "Hard" {
			return a.bad(key, fmt.Sprintf("gangSchedulingStyle %q must be Soft or Hard", value))
		}
		spec.Mode = value
	default:
		return a.bad(key, fmt.Sprintf("%q is not a parameter YuniKorn reads (placeholderTimeoutInSeconds, gangSchedulingStyle)", name))
	}
	return nil
}
