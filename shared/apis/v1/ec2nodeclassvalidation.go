package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Patterns, enums and bounds of the karpenter-provider-aws v1.14.1
// EC2NodeClass CRD (aws: pkg/apis/v1/ec2nodeclass.go).
var (
	subnetIDPattern              = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	securityGroupIDPattern       = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	capacityReservationIDPattern = regexp.MustCompile(`^cr-[0-9a-z]+$`)
	ownerIDPattern               = regexp.MustCompile(`^[0-9]{12}$`)
	placementGroupIDPattern      = regexp.MustCompile(`^pg-[0-9a-z]+$`)
	amiIDPattern                 = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	aliasPattern                 = regexp.MustCompile(`^[a-zA-Z0-9]+@.+$`)

	amiFamilies            = []string{AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyCustom, AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025}
	volumeTypes            = []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}
	instanceMatchCriteria  = []string{"open", "targeted"}
	interfaceTypes         = []string{"interface", "efa-only"}
	enabledDisabled        = []string{"enabled", "disabled"}
	httpTokensValues       = []string{"required", "optional"}
	instanceStorePolicies  = []string{"RAID0"}
	evictionSignals        = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
	reservedResourceKeys   = []string{"cpu", "memory", "ephemeral-storage", "pid"}
	restrictedTagKeys      = []string{TagKeyEKSClusterName, TagKeyNodePool, TagKeyNodeClaim, TagKeyEC2NodeClass}
	restrictedTagKeyPrefix = "kubernetes.io/cluster"
)

const (
	maxSelectorTerms      = 30
	maxSelectorTags       = 20
	maxAliasLen           = 30
	maxBlockDevices       = 50
	maxNetworkInterfaces  = 150
	minVolumeInitRate     = 100
	maxVolumeInitRate     = 300
	minHopLimit           = 1
	maxHopLimit           = 64
	maxVolumeGi           = 59000 // volumeSize limits per unit (CRD pattern)
	maxVolumeG            = 64000
	maxVolumeTi           = 58
	maxVolumeT            = 64
	minTCPEstablishedSecs = 60
	maxTCPEstablishedSecs = 432000
	minUDPStreamSecs      = 60
	maxUDPStreamSecs      = 180
	minUDPSecs            = 30
	maxUDPSecs            = 60
)

// aliasFamilies maps an amiSelectorTerms alias family to its amiFamily.
var aliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// Alias returns the first amiSelectorTerms alias ("al2023@latest"), or "".
func (nc *EC2NodeClass) Alias() string {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			return t.Alias
		}
	}
	return ""
}

// AMIFamily returns the family Karpenter resolves for the class: the alias
// family when an alias term exists (al2023@latest → AL2023), else
// spec.amiFamily, else "" (aws: pkg/apis/v1/ec2nodeclass.go AMIFamily).
func (nc *EC2NodeClass) AMIFamily() string {
	if a := nc.Alias(); a != "" {
		family, _, _ := strings.Cut(a, "@")
		if f, ok := aliasFamilies[family]; ok {
			return f
		}
	}
	if nc.Spec.AMIFamily != nil {
		return *nc.Spec.AMIFamily
	}
	return ""
}

// Validate checks the EC2NodeClass against the rules of karpenter-provider-aws
// v1.14.1's EC2NodeClass CRD (OpenAPI patterns, enums, bounds and CEL rules),
// in our own words. It returns nil, or a *ValidationError listing every
// problem with its field path and what would be valid. Call SetDefaults
// first. It never panics.
func (nc *EC2NodeClass) Validate() error {
	var errs fieldErrors
	validateName(&errs, nc.Name)
	s := nc.Spec
	validateSubnetTerms(&errs, "spec.subnetSelectorTerms", s.SubnetSelectorTerms)
	validateSecurityGroupTerms(&errs, "spec.securityGroupSelectorTerms", s.SecurityGroupSelectorTerms)
	validateCapacityReservationTerms(&errs, "spec.capacityReservationSelectorTerms", s.CapacityReservationSelectorTerms)
	if pg := s.PlacementGroupSelector; pg != nil {
		p := "spec.placementGroupSelector"
		switch {
		case (pg.Name == "") == (pg.ID == ""):
			errs.add(p, "set exactly one of name or id")
		case pg.ID != "" && !placementGroupIDPattern.MatchString(pg.ID):
			errs.add(child(p, "id"), "%q is not a placement group id (pg-...)", pg.ID)
		}
	}
	if s.IPPrefixCount != nil && *s.IPPrefixCount < 0 {
		errs.add("spec.ipPrefixCount", "%d is negative", *s.IPPrefixCount)
	}
	validateAMI(&errs, s)
	validateIdentity(&errs, s)
	validateTags(&errs, "spec.tags", s.Tags)
	if s.Kubelet != nil {
		validateKubelet(&errs, "spec.kubelet", s.Kubelet)
	}
	validateBlockDevices(&errs, "spec.blockDeviceMappings", s.BlockDeviceMappings)
	if s.InstanceStorePolicy != nil && !slices.Contains(instanceStorePolicies, *s.InstanceStorePolicy) {
		errs.add("spec.instanceStorePolicy", "%q is not one of %s", *s.InstanceStorePolicy, strings.Join(instanceStorePolicies, ", "))
	}
	validateNetworkInterfaces(&errs, "spec.networkInterfaces", s.NetworkInterfaces)
	validateMetadataOptions(&errs, "spec.metadataOptions", s.MetadataOptions)
	validateConnectionTracking(&errs, "spec.connectionTracking", s.ConnectionTracking)
	if c := s.CPUOptions; c != nil && c.NestedVirtualization != nil && !slices.Contains(enabledDisabled, *c.NestedVirtualization) {
		errs.add("spec.cpuOptions.nestedVirtualization", "%q is not one of %s", *c.NestedVirtualization, strings.Join(enabledDisabled, ", "))
	}
	refuseUnapplied(&errs, s)
	return errs.result(KindEC2NodeClass, nc.Name)
}

// UnappliedField is a v1 EC2NodeClass spec field that the schema accepts
// but nodewright does not apply to a launch yet.
type UnappliedField struct {
	// Path is the field path, as in a FieldError ("spec.cpuOptions").
	Path string
	// Reason says what nodewright would have to do to apply it.
	Reason string
	set    func(EC2NodeClassSpec) bool
}

// UnappliedFields are refused by EC2NodeClass.Validate when set, so that a
// class is never accepted (or reported Ready) while a field that Karpenter
// would apply is dropped. docs/compatibility.md lists the same fields.
// It is empty: every field of the v1.14.1 schema is applied.
var UnappliedFields = []UnappliedField{}

// refuseUnapplied adds an error for each set field of UnappliedFields.
func refuseUnapplied(errs *fieldErrors, s EC2NodeClassSpec) {
	for _, u := range UnappliedFields {
		if u.set(s) {
			errs.add(u.Path, "not supported: %s; remove the field (Karpenter would apply it, nodewright would launch without it)", u.Reason)
		}
	}
}

// Warnings lists what EC2NodeClass.Validate accepts but Karpenter would not
// act on as written: an al2 alias (Karpenter refuses it on Kubernetes 1.33
// and later with UnsupportedAlias) and kubelet keys outside the v1.14.1
// schema (see KubeletConfiguration.Extra).
func (nc *EC2NodeClass) Warnings() []FieldError {
	var warns fieldErrors
	for i, t := range nc.Spec.AMISelectorTerms {
		if family, _, _ := strings.Cut(t.Alias, "@"); family == "al2" {
			warns.add(child(index("spec.amiSelectorTerms", i), "alias"), "al2 AMIs are not published for Kubernetes 1.33 and later (Karpenter reports UnsupportedAlias there)")
		}
	}
	return warns
}

// Selector terms: an empty tags map counts as unset. (Karpenter's CEL rules
// treat "tags: {}" as present, which would select every resource; nodewright
// refuses it.)

func checkSelectorTags(errs *fieldErrors, path string, tags map[string]string) {
	if len(tags) > maxSelectorTags {
		errs.add(path, "has %d tags, at most %d are allowed", len(tags), maxSelectorTags)
	}
	for _, k := range sortedKeys(tags) {
		if k == "" {
			errs.add(path, "empty tag keys are not supported")
		} else if tags[k] == "" {
			errs.add(key(path, k), "empty tag values are not supported; use \"*\" to match any value")
		}
	}
}

func checkTermCount(errs *fieldErrors, path string, n int, required bool) {
	switch {
	case n == 0 && required:
		errs.add(path, "required: at least one term")
	case n > maxSelectorTerms:
		errs.add(path, "has %d terms, at most %d are allowed", n, maxSelectorTerms)
	}
}

func validateSubnetTerms(errs *fieldErrors, path string, terms []SubnetSelectorTerm) {
	checkTermCount(errs, path, len(terms), true)
	for i, t := range terms {
		p := index(path, i)
		switch {
		case len(t.Tags) == 0 && t.ID == "":
			errs.add(p, "set one of tags or id")
		case t.ID != "" && len(t.Tags) != 0:
			errs.add(p, "id cannot be combined with tags")
		}
		if t.ID != "" && !subnetIDPattern.MatchString(t.ID) {
			errs.add(child(p, "id"), "%q is not a subnet id (subnet-...)", t.ID)
		}
		checkSelectorTags(errs, child(p, "tags"), t.Tags)
	}
}

func validateSecurityGroupTerms(errs *fieldErrors, path string, terms []SecurityGroupSelectorTerm) {
	checkTermCount(errs, path, len(terms), true)
	for i, t := range terms {
		p := index(path, i)
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.Name == "":
			errs.add(p, "set one of tags, id or name")
		case t.ID != "" && (len(t.Tags) != 0 || t.Name != ""):
			errs.add(p, "id cannot be combined with tags or name")
		case t.Name != "" && len(t.Tags) != 0:
			errs.add(p, "name cannot be combined with tags")
		}
		if t.ID != "" && !securityGroupIDPattern.MatchString(t.ID) {
			errs.add(child(p, "id"), "%q is not a security group id (sg-...)", t.ID)
		}
		checkSelectorTags(errs, child(p, "tags"), t.Tags)
	}
}

func validateCapacityReservationTerms(errs *fieldErrors, path string, terms []CapacityReservationSelectorTerm) {
	checkTermCount(errs, path, len(terms), false)
	for i, t := range terms {
		p := index(path, i)
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.InstanceMatchCriteria == "":
			errs.add(p, "set one of tags, id or instanceMatchCriteria")
		case t.ID != "" && (len(t.Tags) != 0 || t.OwnerID != "" || t.InstanceMatchCriteria != ""):
			errs.add(p, "id cannot be combined with tags, ownerID or instanceMatchCriteria")
		}
		if t.ID != "" && !capacityReservationIDPattern.MatchString(t.ID) {
			errs.add(child(p, "id"), "%q is not a capacity reservation id (cr-...)", t.ID)
		}
		if t.OwnerID != "" && !ownerIDPattern.MatchString(t.OwnerID) {
			errs.add(child(p, "ownerID"), "%q is not a 12-digit AWS account id", t.OwnerID)
		}
		if t.InstanceMatchCriteria != "" && !slices.Contains(instanceMatchCriteria, t.InstanceMatchCriteria) {
			errs.add(child(p, "instanceMatchCriteria"), "%q is not one of %s", t.InstanceMatchCriteria, strings.Join(instanceMatchCriteria, ", "))
		}
		checkSelectorTags(errs, child(p, "tags"), t.Tags)
	}
}

func validateAMI(errs *fieldErrors, s EC2NodeClassSpec) {
	path := "spec.amiSelectorTerms"
	checkTermCount(errs, path, len(s.AMISelectorTerms), true)
	aliasFamily := ""
	for i, t := range s.AMISelectorTerms {
		p := index(path, i)
		switch {
		case len(t.Tags) == 0 && t.ID == "" && t.Name == "" && t.Alias == "" && t.SSMParameter == "":
			errs.add(p, "set one of alias, tags, id, name or ssmParameter")
		case t.Alias != "" && (len(t.Tags) != 0 || t.ID != "" || t.Name != "" || t.Owner != "" || t.SSMParameter != ""):
			errs.add(p, "alias cannot be combined with tags, id, name, owner or ssmParameter")
		case t.ID != "" && (len(t.Tags) != 0 || t.Name != "" || t.Owner != ""):
			errs.add(p, "id cannot be combined with tags, name or owner")
		}
		if t.ID != "" && !amiIDPattern.MatchString(t.ID) {
			errs.add(child(p, "id"), "%q is not an AMI id (ami-...)", t.ID)
		}
		checkSelectorTags(errs, child(p, "tags"), t.Tags)
		if t.Alias == "" {
			continue
		}
		if len(s.AMISelectorTerms) > 1 {
			errs.add(child(p, "alias"), "an alias must be the only amiSelectorTerms entry")
		}
		if f := validateAlias(errs, child(p, "alias"), t.Alias); f != "" && aliasFamily == "" {
			aliasFamily = f
		}
	}
	fp := "spec.amiFamily"
	switch {
	case s.AMIFamily == nil:
		if !slices.ContainsFunc(s.AMISelectorTerms, func(t AMISelectorTerm) bool { return t.Alias != "" }) {
			errs.add(fp, "required unless amiSelectorTerms has an alias; one of %s", strings.Join(amiFamilies, ", "))
		}
	case !slices.Contains(amiFamilies, *s.AMIFamily):
		errs.add(fp, "%q is not one of %s", *s.AMIFamily, strings.Join(amiFamilies, ", "))
	case aliasFamily != "" && *s.AMIFamily != aliasFamily && *s.AMIFamily != AMIFamilyCustom:
		errs.add(fp, "%q does not match the alias family %s; use %s or Custom, or omit amiFamily", *s.AMIFamily, aliasFamily, aliasFamily)
	}
}

// validateAlias checks "family@version" and returns the amiFamily of a
// valid family.
func validateAlias(errs *fieldErrors, path, alias string) string {
	if len(alias) > maxAliasLen {
		errs.add(path, "%q is longer than %d characters", alias, maxAliasLen)
	}
	if !aliasPattern.MatchString(alias) {
		errs.add(path, "%q is not of the form family@version, such as \"al2023@latest\"", alias)
		return ""
	}
	family, version, _ := strings.Cut(alias, "@")
	f, ok := aliasFamilies[family]
	if !ok {
		errs.add(path, "family %q is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", family)
		return ""
	}
	if strings.HasPrefix(family, "windows") && version != "latest" {
		errs.add(path, "windows families accept only version \"latest\" (%s@latest)", family)
	}
	return f
}

func validateIdentity(errs *fieldErrors, s EC2NodeClassSpec) {
	hasProfile := s.InstanceProfile != nil
	switch {
	case s.Role == "" && !hasProfile:
		errs.add("spec", "set exactly one of role or instanceProfile; neither is set")
	case s.Role != "" && hasProfile:
		errs.add("spec", "set exactly one of role or instanceProfile; both are set")
	case hasProfile && *s.InstanceProfile == "":
		errs.add("spec.instanceProfile", "cannot be empty")
	}
}

func validateTags(errs *fieldErrors, path string, tags map[string]string) {
	for _, k := range sortedKeys(tags) {
		switch {
		case k == "":
			errs.add(path, "empty tag keys are not supported")
		case slices.Contains(restrictedTagKeys, k):
			errs.add(key(path, k), "tag %q is restricted; Karpenter sets it", k)
		case strings.HasPrefix(k, restrictedTagKeyPrefix):
			errs.add(key(path, k), "tags starting with %q are restricted; Karpenter sets the cluster tag", restrictedTagKeyPrefix)
		}
	}
}

func validateKubelet(errs *fieldErrors, path string, k *KubeletConfiguration) {
	if k.MaxPods != nil && *k.MaxPods < 0 {
		errs.add(child(path, "maxPods"), "%d is negative", *k.MaxPods)
	}
	if k.PodsPerCore != nil && *k.PodsPerCore < 0 {
		errs.add(child(path, "podsPerCore"), "%d is negative", *k.PodsPerCore)
	}
	for _, f := range []struct {
		name string
		m    map[string]string
	}{{"systemReserved", k.SystemReserved}, {"kubeReserved", k.KubeReserved}} {
		for _, name := range sortedKeys(f.m) {
			p := key(child(path, f.name), name)
			if !slices.Contains(reservedResourceKeys, name) {
				errs.add(p, "%q is not one of %s", name, strings.Join(reservedResourceKeys, ", "))
			}
			if q, err := resource.ParseQuantity(f.m[name]); err != nil {
				errs.add(p, "%q is not a quantity such as \"100m\" or \"1Gi\"", f.m[name])
			} else if q.Sign() < 0 {
				errs.add(p, "%q is negative", f.m[name])
			}
		}
	}
	for _, f := range []struct {
		name string
		m    map[string]string
	}{{"evictionHard", k.EvictionHard}, {"evictionSoft", k.EvictionSoft}} {
		for _, name := range sortedKeys(f.m) {
			p := key(child(path, f.name), name)
			if !slices.Contains(evictionSignals, name) {
				errs.add(p, "%q is not an eviction signal; one of %s", name, strings.Join(evictionSignals, ", "))
			}
			if msg := checkEvictionThreshold(f.m[name]); msg != "" {
				errs.add(p, "%s", msg)
			}
		}
	}
	gp := child(path, "evictionSoftGracePeriod")
	for _, name := range sortedKeys(k.EvictionSoftGracePeriod) {
		p := key(gp, name)
		if !slices.Contains(evictionSignals, name) {
			errs.add(p, "%q is not an eviction signal; one of %s", name, strings.Join(evictionSignals, ", "))
		}
		if d := k.EvictionSoftGracePeriod[name]; !validGoDuration(d) {
			errs.add(p, "%q is not a duration such as \"1m30s\"", d.Raw)
		}
		if _, ok := k.EvictionSoft[name]; !ok {
			errs.add(p, "has no matching evictionSoft[%s]", name)
		}
	}
	for _, name := range sortedKeys(k.EvictionSoft) {
		if _, ok := k.EvictionSoftGracePeriod[name]; !ok {
			errs.add(key(child(path, "evictionSoft"), name), "needs a matching evictionSoftGracePeriod[%s]", name)
		}
	}
	high, low := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent
	for _, f := range []struct {
		name string
		v    *int32
	}{{"imageGCHighThresholdPercent", high}, {"imageGCLowThresholdPercent", low}} {
		if f.v != nil && (*f.v < 0 || *f.v > 100) {
			errs.add(child(path, f.name), "%d is out of range 0..100", *f.v)
		}
	}
	if high != nil && low != nil && *high <= *low {
		errs.add(child(path, "imageGCHighThresholdPercent"), "%d must be greater than imageGCLowThresholdPercent (%d)", *high, *low)
	}
}

// validGoDuration reports whether d was built in code or its text parses as
// a Go duration (metav1.Duration's format, which Karpenter uses here).
func validGoDuration(d Duration) bool {
	if d.Raw == "" {
		return true
	}
	_, err := time.ParseDuration(d.Raw)
	return err == nil
}

// checkEvictionThreshold accepts a percentage ("10%", up to "100%") or a
// non-negative quantity ("100Mi").
func checkEvictionThreshold(v string) string {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		q, err := resource.ParseQuantity(pct)
		if err != nil || q.Sign() < 0 || q.Cmp(resource.MustParse("100")) > 0 {
			return fmt.Sprintf("%q is not a percentage from 0%% to 100%%", v)
		}
		return ""
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Sprintf("%q is not a quantity (\"100Mi\") or a percentage (\"10%%\")", v)
	}
	if q.Sign() < 0 {
		return fmt.Sprintf("%q is negative", v)
	}
	return ""
}

func validateBlockDevices(errs *fieldErrors, path string, bdms []*BlockDeviceMapping) {
	if len(bdms) > maxBlockDevices {
		errs.add(path, "has %d entries, at most %d are allowed", len(bdms), maxBlockDevices)
	}
	rootAt := -1
	for i, b := range bdms {
		p := index(path, i)
		if b == nil {
			errs.add(p, "must be an object")
			continue
		}
		if b.RootVolume {
			if rootAt >= 0 {
				errs.add(child(p, "rootVolume"), "only one mapping may be the root volume; %s already is", index(path, rootAt))
			} else {
				rootAt = i
			}
		}
		if b.EBS != nil {
			validateEBS(errs, child(p, "ebs"), b.EBS)
		}
	}
}

func validateEBS(errs *fieldErrors, path string, e *BlockDevice) {
	hasSnapshot := e.SnapshotID != nil && *e.SnapshotID != ""
	if e.SnapshotID == nil && e.VolumeSize == nil {
		errs.add(path, "set volumeSize or snapshotID")
	}
	if e.VolumeSize != nil {
		if msg := checkVolumeSize(*e.VolumeSize); msg != "" {
			errs.add(child(path, "volumeSize"), "%s", msg)
		}
	}
	if e.VolumeType != nil && !slices.Contains(volumeTypes, *e.VolumeType) {
		errs.add(child(path, "volumeType"), "%q is not one of %s", *e.VolumeType, strings.Join(volumeTypes, ", "))
	}
	if r := e.VolumeInitializationRate; r != nil {
		if *r < minVolumeInitRate || *r > maxVolumeInitRate {
			errs.add(child(path, "volumeInitializationRate"), "%d is out of range %d..%d (MiB/s)", *r, minVolumeInitRate, maxVolumeInitRate)
		}
		if !hasSnapshot {
			errs.add(child(path, "volumeInitializationRate"), "needs snapshotID")
		}
	}
}

// checkVolumeSize follows the CRD's volumeSize pattern: a whole number of
// Gi (1..59000), G (1..64000), Ti (1..58) or T (1..64). The limits are
// applied to the quantity's canonical text ("1024Gi" is checked as "1Ti"),
// because a decoded quantity does not keep the text it was written as.
func checkVolumeSize(q resource.Quantity) string {
	s := q.String()
	limits := []struct {
		unit string
		max  int
	}{{"Gi", maxVolumeGi}, {"Ti", maxVolumeTi}, {"G", maxVolumeG}, {"T", maxVolumeT}}
	for _, l := range limits {
		num, ok := strings.CutSuffix(s, l.unit)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err == nil && n >= 1 && n <= l.max && !strings.HasPrefix(num, "0") && !strings.HasPrefix(num, "+") {
			return ""
		}
		break
	}
	return fmt.Sprintf("%q is not a size from 1Gi to 59000Gi (or 1G to 64000G, 1Ti to 58Ti, 1T to 64T)", s)
}

func validateNetworkInterfaces(errs *fieldErrors, path string, nis []NetworkInterface) {
	if nis == nil {
		return // unset; an empty written list still lacks the primary interface
	}
	if len(nis) > maxNetworkInterfaces {
		errs.add(path, "has %d entries, at most %d are allowed", len(nis), maxNetworkInterfaces)
	}
	seen := map[[2]int32]int{}
	efaPerCard := map[int32]int{}
	hasPrimary := false
	for i, ni := range nis {
		p := index(path, i)
		if ni.NetworkCardIndex < 0 {
			errs.add(child(p, "networkCardIndex"), "%d is negative", ni.NetworkCardIndex)
		}
		if ni.DeviceIndex < 0 {
			errs.add(child(p, "deviceIndex"), "%d is negative", ni.DeviceIndex)
		}
		if !slices.Contains(interfaceTypes, ni.InterfaceType) {
			errs.add(child(p, "interfaceType"), "%q is not one of %s", ni.InterfaceType, strings.Join(interfaceTypes, ", "))
		}
		id := [2]int32{ni.NetworkCardIndex, ni.DeviceIndex}
		if prev, dup := seen[id]; dup {
			errs.add(p, "networkCardIndex %d and deviceIndex %d are already used by %s", id[0], id[1], index(path, prev))
		} else {
			seen[id] = i
		}
		if ni.InterfaceType == "efa-only" {
			efaPerCard[ni.NetworkCardIndex]++
			if efaPerCard[ni.NetworkCardIndex] == 2 {
				errs.add(p, "network card %d already has an efa-only interface; at most one is allowed per card", ni.NetworkCardIndex)
			}
		}
		if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 && ni.InterfaceType == "interface" {
			hasPrimary = true
		}
	}
	if !hasPrimary {
		errs.add(path, "must include the primary interface: networkCardIndex 0, deviceIndex 0, interfaceType interface")
	}
}

func validateMetadataOptions(errs *fieldErrors, path string, m *MetadataOptions) {
	if m == nil {
		return
	}
	if m.HTTPEndpoint != nil && !slices.Contains(enabledDisabled, *m.HTTPEndpoint) {
		errs.add(child(path, "httpEndpoint"), "%q is not one of %s", *m.HTTPEndpoint, strings.Join(enabledDisabled, ", "))
	}
	if m.HTTPProtocolIPv6 != nil && !slices.Contains(enabledDisabled, *m.HTTPProtocolIPv6) {
		errs.add(child(path, "httpProtocolIPv6"), "%q is not one of %s", *m.HTTPProtocolIPv6, strings.Join(enabledDisabled, ", "))
	}
	if h := m.HTTPPutResponseHopLimit; h != nil && (*h < minHopLimit || *h > maxHopLimit) {
		errs.add(child(path, "httpPutResponseHopLimit"), "%d is out of range %d..%d", *h, minHopLimit, maxHopLimit)
	}
	if m.HTTPTokens != nil && !slices.Contains(httpTokensValues, *m.HTTPTokens) {
		errs.add(child(path, "httpTokens"), "%q is not one of %s", *m.HTTPTokens, strings.Join(httpTokensValues, ", "))
	}
}

func validateConnectionTracking(errs *fieldErrors, path string, c *ConnectionTracking) {
	if c == nil {
		return
	}
	if c.TCPEstablishedTimeout == nil && c.UDPStreamTimeout == nil && c.UDPTimeout == nil {
		errs.add(path, "set at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout")
	}
	for _, f := range []struct {
		name     string
		v        *int32
		min, max int32
	}{
		{"tcpEstablishedTimeout", c.TCPEstablishedTimeout, minTCPEstablishedSecs, maxTCPEstablishedSecs},
		{"udpStreamTimeout", c.UDPStreamTimeout, minUDPStreamSecs, maxUDPStreamSecs},
		{"udpTimeout", c.UDPTimeout, minUDPSecs, maxUDPSecs},
	} {
		if f.v != nil && (*f.v < f.min || *f.v > f.max) {
			errs.add(child(path, f.name), "%d is out of range %d..%d (seconds)", *f.v, f.min, f.max)
		}
	}
}
