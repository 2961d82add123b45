package ec2sim

import (
	"cmp"
	"encoding/base64"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// launchTemplate is a stored launch template (one version).
type launchTemplate struct {
	id, name string
	created  time.Time
	tags     map[string]string
	data     ltData
	raw      map[string]string
}

// ltData is the part of RequestLaunchTemplateData the simulator uses.
type ltData struct {
	imageID, instanceType, userData string
	securityGroupIDs                []string
	iamProfileName, iamProfileArn   string
	bdms                            []BlockDeviceMapping
	metadata                        map[string]string
	tagSpecs                        map[string][]tag
	nis                             []ltNetworkInterface
	monitoring                      bool
	// tenancy is Placement.Tenancy ("" when unset: default).
	tenancy string
	// groupID, groupName and partition are Placement.GroupId, GroupName
	// and PartitionNumber (0 when unset).
	groupID, groupName string
	partition          int
	// crPreference and crTarget are CapacityReservationSpecification's
	// CapacityReservationPreference and target reservation ID.
	crPreference, crTarget string
	// marketType is InstanceMarketOptions.MarketType ("" when unset).
	marketType string
}

type ltNetworkInterface struct {
	deviceIndex, networkCardIndex int
	subnetID, interfaceType       string
	groups                        []string
	associatePublicIP             *bool
}

// BlockDeviceMapping is one EBS volume of a launch template.
type BlockDeviceMapping struct {
	DeviceName          string `json:"deviceName"`
	VolumeSizeGiB       int    `json:"volumeSizeGiB"`
	VolumeType          string `json:"volumeType"`
	IOPS                int    `json:"iops"`
	Throughput          int    `json:"throughput"`
	Encrypted           bool   `json:"encrypted"`
	DeleteOnTermination bool   `json:"deleteOnTermination"`
	KMSKeyID            string `json:"kmsKeyId"`
	SnapshotID          string `json:"snapshotId"`
}

// LaunchTemplate is a snapshot of a launch template.
type LaunchTemplate struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	CreateTime time.Time         `json:"createTime"`
	Tags       map[string]string `json:"tags"`
	ImageID    string            `json:"imageId"`
	// InstanceType is set only when the template names one.
	InstanceType string `json:"instanceType"`
	// UserData is the decoded user data.
	UserData         []byte   `json:"userData"`
	SecurityGroupIDs []string `json:"securityGroupIds"`
	// IAMInstanceProfile is the profile name or ARN as given.
	IAMInstanceProfile  string               `json:"iamInstanceProfile"`
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings"`
	// MetadataOptions holds MetadataOptions.* (HttpTokens, ...).
	MetadataOptions map[string]string `json:"metadataOptions"`
	// TagSpecifications maps a resource type (instance, volume,
	// network-interface, spot-instances-request) to its tags.
	TagSpecifications map[string]map[string]string `json:"tagSpecifications"`
	// Data holds every LaunchTemplateData parameter as sent, keyed by its
	// query path below LaunchTemplateData, e.g. "MetadataOptions.HttpTokens"
	// or "BlockDeviceMapping.1.Ebs.VolumeSize".
	Data map[string]string `json:"data"`
}

func (lt *launchTemplate) snapshot() LaunchTemplate {
	ud, err := base64.StdEncoding.DecodeString(lt.data.userData)
	if err != nil {
		ud = []byte(lt.data.userData)
	}
	if len(ud) == 0 {
		ud = nil
	}
	out := LaunchTemplate{
		ID: lt.id, Name: lt.name, CreateTime: lt.created, Tags: maps.Clone(lt.tags), ImageID: lt.data.imageID,
		InstanceType: lt.data.instanceType, UserData: ud, SecurityGroupIDs: slices.Clone(lt.data.securityGroupIDs),
		IAMInstanceProfile:  cmp.Or(lt.data.iamProfileArn, lt.data.iamProfileName),
		BlockDeviceMappings: slices.Clone(lt.data.bdms), MetadataOptions: maps.Clone(lt.data.metadata),
		TagSpecifications: map[string]map[string]string{}, Data: maps.Clone(lt.raw),
	}
	for rt, tags := range lt.data.tagSpecs {
		out.TagSpecifications[rt] = tagMap(tags)
	}
	return out
}

// LaunchTemplates returns every launch template, sorted by name.
func (s *Server) LaunchTemplates() []LaunchTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LaunchTemplate, 0, len(s.templates))
	for _, lt := range s.templates {
		out = append(out, lt.snapshot())
	}
	slices.SortFunc(out, func(a, b LaunchTemplate) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LaunchTemplate returns the template with this name or ID.
func (s *Server) LaunchTemplate(nameOrID string) (LaunchTemplate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lt := s.templateByName(nameOrID); lt != nil {
		return lt.snapshot(), true
	}
	if lt, ok := s.templates[nameOrID]; ok {
		return lt.snapshot(), true
	}
	return LaunchTemplate{}, false
}

func (s *Server) templateByName(name string) *launchTemplate {
	for _, lt := range s.templates {
		if lt.name == name {
			return lt
		}
	}
	return nil
}

// parseLTData decodes LaunchTemplateData.
func parseLTData(d *qnode) (ltData, error) {
	out := ltData{
		imageID:          d.str("ImageId"),
		instanceType:     d.str("InstanceType"),
		userData:         d.str("UserData"),
		securityGroupIDs: d.strs("SecurityGroupId"),
		iamProfileName:   d.str("IamInstanceProfile.Name"),
		iamProfileArn:    d.str("IamInstanceProfile.Arn"),
		metadata:         map[string]string{},
		tagSpecs:         tagSpecs(d.list("TagSpecification")),
		tenancy:          d.str("Placement.Tenancy"),
		groupID:          d.str("Placement.GroupId"),
		groupName:        d.str("Placement.GroupName"),
		crPreference:     d.str("CapacityReservationSpecification.CapacityReservationPreference"),
		crTarget:         d.str("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
		marketType:       d.str("InstanceMarketOptions.MarketType"),
	}
	switch out.crPreference {
	case "", "open", "none", "capacity-reservations-only":
	default:
		return ltData{}, invalidParameterValue("Value (%s) for parameter CapacityReservationPreference is invalid.", out.crPreference)
	}
	switch out.marketType {
	case "", marketSpot, marketCapacityBlock, marketInterruptible:
	default:
		return ltData{}, invalidParameterValue("Value (%s) for parameter MarketType is invalid. Valid values are spot, capacity-block, interruptible-capacity-reservation.", out.marketType)
	}
	if n, _, err := d.intParam("Placement.PartitionNumber"); err != nil {
		return ltData{}, err
	} else {
		out.partition = n
	}
	if out.groupID != "" && out.groupName != "" {
		return ltData{}, invalidParameterValue("Specify either the placement group name or ID, not both.")
	}
	switch out.tenancy {
	case "", "default", "dedicated", "host":
	default:
		return ltData{}, invalidParameterValue("Value (%s) for parameter tenancy is invalid. Valid values are default, dedicated, host.", out.tenancy)
	}
	if out.userData != "" {
		if _, err := base64.StdEncoding.DecodeString(out.userData); err != nil {
			return ltData{}, invalidParameterValue("Invalid BASE64 encoding of user data.")
		}
	}
	for k, v := range d.get("MetadataOptions").flatten() {
		out.metadata[k] = v
	}
	for _, m := range d.list("BlockDeviceMapping") {
		b := BlockDeviceMapping{DeviceName: m.str("DeviceName"), VolumeType: m.str("Ebs.VolumeType"),
			KMSKeyID: m.str("Ebs.KmsKeyId"), SnapshotID: m.str("Ebs.SnapshotId"), DeleteOnTermination: true}
		var err error
		if b.VolumeSizeGiB, _, err = m.intParam("Ebs.VolumeSize"); err != nil {
			return ltData{}, err
		}
		if b.IOPS, _, err = m.intParam("Ebs.Iops"); err != nil {
			return ltData{}, err
		}
		if b.Throughput, _, err = m.intParam("Ebs.Throughput"); err != nil {
			return ltData{}, err
		}
		if b.Encrypted, _, err = m.boolParam("Ebs.Encrypted"); err != nil {
			return ltData{}, err
		}
		if v, ok, err := m.boolParam("Ebs.DeleteOnTermination"); err != nil {
			return ltData{}, err
		} else if ok {
			b.DeleteOnTermination = v
		}
		if b.DeviceName == "" {
			return ltData{}, missingParameter("BlockDeviceMapping.DeviceName")
		}
		out.bdms = append(out.bdms, b)
	}
	for _, m := range d.list("NetworkInterface") {
		ni := ltNetworkInterface{subnetID: m.str("SubnetId"), interfaceType: m.str("InterfaceType"), groups: m.strs("SecurityGroupId")}
		var err error
		if ni.deviceIndex, _, err = m.intParam("DeviceIndex"); err != nil {
			return ltData{}, err
		}
		if ni.networkCardIndex, _, err = m.intParam("NetworkCardIndex"); err != nil {
			return ltData{}, err
		}
		if v, ok, err := m.boolParam("AssociatePublicIpAddress"); err != nil {
			return ltData{}, err
		} else if ok {
			ni.associatePublicIP = &v
		}
		out.nis = append(out.nis, ni)
	}
	if v, _, err := d.boolParam("Monitoring.Enabled"); err != nil {
		return ltData{}, err
	} else {
		out.monitoring = v
	}
	return out, nil
}

// ltNameChars are the characters EC2 allows in a launch template name.
const ltNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789().-/_"

// validLTName applies EC2's launch template name rule: 3 to 128
// characters of [a-zA-Z0-9().-/_].
func validLTName(name string) bool {
	if len(name) < 3 || len(name) > 128 {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune(ltNameChars, c) {
			return false
		}
	}
	return true
}

type launchTemplateXML struct {
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int      `xml:"defaultVersionNumber"`
	LatestVersionNumber  int      `xml:"latestVersionNumber"`
	TagSet               []tagXML `xml:"tagSet>item,omitempty"`
}

func (s *Server) launchTemplateXML(lt *launchTemplate) launchTemplateXML {
	return launchTemplateXML{LaunchTemplateID: lt.id, LaunchTemplateName: lt.name, CreateTime: timestamp(lt.created),
		CreatedBy: "arn:aws:iam::" + s.accountID + ":root", DefaultVersionNumber: 1, LatestVersionNumber: 1, TagSet: tagSet(lt.tags)}
}

type launchTemplateResponse struct {
	respHeader
	LaunchTemplate launchTemplateXML `xml:"launchTemplate"`
}

// createLaunchTemplate follows EC2 CreateLaunchTemplate: a ClientToken
// seen before returns the template it created; a taken name fails with
// InvalidLaunchTemplateName.AlreadyExistsException. Tags come from
// TagSpecification.N with ResourceType launch-template. Only version 1
// exists (no CreateLaunchTemplateVersion). A valid request then meets the
// permission check (authorize: UnauthorizedOperation when denied,
// DryRunOperation for a dry run, which creates nothing and ignores its
// ClientToken) before the name's uniqueness is checked.
func (s *Server) createLaunchTemplate(q *qnode, now time.Time) (response, error) {
	dryRun, err := dryRunParam(q)
	if err != nil {
		return nil, err
	}
	if tok := q.str("ClientToken"); tok != "" && !dryRun {
		if id, ok := s.ltTokens[tok]; ok {
			if lt, ok := s.templates[id]; ok {
				return &launchTemplateResponse{LaunchTemplate: s.launchTemplateXML(lt)}, nil
			}
		}
	}
	name := q.str("LaunchTemplateName")
	switch {
	case name == "":
		return nil, missingParameter("LaunchTemplateName")
	case !validLTName(name):
		return nil, errorf("InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	case q.get("LaunchTemplateData") == nil:
		return nil, missingParameter("LaunchTemplateData")
	}
	data, err := parseLTData(q.get("LaunchTemplateData"))
	if err != nil {
		return nil, err
	}
	specs := tagSpecs(q.list("TagSpecification"))
	for rt := range specs {
		if rt != "launch-template" {
			return nil, invalidParameterValue("'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	for _, tags := range data.tagSpecs {
		if err := validateTags(tags, nil); err != nil {
			return nil, err
		}
	}
	if err := validateTags(specs["launch-template"], nil); err != nil {
		return nil, err
	}
	// The permission check follows the parameters' validation and precedes
	// the name's uniqueness, a check of the account's state.
	if err := s.authorize("CreateLaunchTemplate", q, "launch-template/*"); err != nil {
		return nil, err
	}
	if s.templateByName(name) != nil {
		return nil, errorf("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	lt := &launchTemplate{id: s.newID("lt"), name: name, created: now.UTC().Truncate(time.Second),
		tags: tagMap(specs["launch-template"]), data: data, raw: q.get("LaunchTemplateData").flatten()}
	s.templates[lt.id] = lt
	if tok := q.str("ClientToken"); tok != "" {
		s.ltTokens[tok] = lt.id
	}
	return &launchTemplateResponse{LaunchTemplate: s.launchTemplateXML(lt)}, nil
}

type describeLaunchTemplatesResponse struct {
	respHeader
	LaunchTemplates []launchTemplateXML `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

// findTemplates resolves LaunchTemplateId.N / LaunchTemplateName.N; any
// unknown one fails the call as EC2 does.
func (s *Server) findTemplates(ids, names []string) error {
	for _, id := range ids {
		if _, ok := s.templates[id]; !ok {
			return errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	}
	for _, n := range names {
		if s.templateByName(n) == nil {
			return errorf("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
	}
	return nil
}

// sortedTemplates returns the templates ordered by creation, then ID.
func (s *Server) sortedTemplates() []*launchTemplate {
	out := slices.Collect(maps.Values(s.templates))
	slices.SortFunc(out, func(a, b *launchTemplate) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// describeLaunchTemplates follows EC2 DescribeLaunchTemplates: IDs, names
// (unknown ones fail the call), filters launch-template-name and tags, and
// pagination (MaxResults 1 to 200).
func (s *Server) describeLaunchTemplates(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"launch-template-name", "create-time"}, true)
	if err != nil {
		return nil, err
	}
	ids, names := q.strs("LaunchTemplateId"), q.strs("LaunchTemplateName")
	if err := s.findTemplates(ids, names); err != nil {
		return nil, err
	}
	var out []launchTemplateXML
	for _, lt := range s.sortedTemplates() {
		if len(ids) > 0 && !slices.Contains(ids, lt.id) || len(names) > 0 && !slices.Contains(names, lt.name) {
			continue
		}
		field := func(name string) []string {
			switch name {
			case "launch-template-name":
				return []string{lt.name}
			case "create-time":
				return []string{timestamp(lt.created)}
			}
			return nil
		}
		if matches(filters, lt.tags, field) {
			out = append(out, s.launchTemplateXML(lt))
		}
	}
	p, err := paginate(q, "DescribeLaunchTemplates", len(out), 1, 200, 0)
	if err != nil {
		return nil, err
	}
	return &describeLaunchTemplatesResponse{LaunchTemplates: out[p.start:p.end], NextToken: p.next}, nil
}

// deleteLaunchTemplate follows EC2 DeleteLaunchTemplate (by ID or name).
// Instances launched from the template keep running.
func (s *Server) deleteLaunchTemplate(q *qnode, _ time.Time) (response, error) {
	id, name := q.str("LaunchTemplateId"), q.str("LaunchTemplateName")
	var lt *launchTemplate
	switch {
	case id != "":
		lt = s.templates[id]
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		lt = s.templateByName(name)
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, missingParameter("LaunchTemplateId or LaunchTemplateName")
	}
	delete(s.templates, lt.id)
	return &launchTemplateResponse{LaunchTemplate: s.launchTemplateXML(lt)}, nil
}

type ltEbsXML struct {
	Encrypted           bool   `xml:"encrypted"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	Iops                int    `xml:"iops,omitempty"`
	KmsKeyID            string `xml:"kmsKeyId,omitempty"`
	SnapshotID          string `xml:"snapshotId,omitempty"`
	VolumeSize          int    `xml:"volumeSize,omitempty"`
	VolumeType          string `xml:"volumeType,omitempty"`
	Throughput          int    `xml:"throughput,omitempty"`
}

type ltBlockDeviceXML struct {
	DeviceName string   `xml:"deviceName"`
	Ebs        ltEbsXML `xml:"ebs"`
}

type ltIamProfileXML struct {
	Arn  string `xml:"arn,omitempty"`
	Name string `xml:"name,omitempty"`
}

type ltMetadataXML struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens,omitempty"`
	HTTPPutResponseHopLimit string `xml:"httpPutResponseHopLimit,omitempty"`
	HTTPEndpoint            string `xml:"httpEndpoint,omitempty"`
	HTTPProtocolIpv6        string `xml:"httpProtocolIpv6,omitempty"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags,omitempty"`
}

type ltTagSpecXML struct {
	ResourceType string   `xml:"resourceType"`
	TagSet       []tagXML `xml:"tagSet>item"`
}

type ltNetworkInterfaceXML struct {
	DeviceIndex              int      `xml:"deviceIndex"`
	NetworkCardIndex         int      `xml:"networkCardIndex"`
	SubnetID                 string   `xml:"subnetId,omitempty"`
	InterfaceType            string   `xml:"interfaceType,omitempty"`
	AssociatePublicIPAddress *bool    `xml:"associatePublicIpAddress,omitempty"`
	Groups                   []string `xml:"groupSet>groupId,omitempty"`
}

type ltDataXML struct {
	ImageID             string                  `xml:"imageId,omitempty"`
	InstanceType        string                  `xml:"instanceType,omitempty"`
	UserData            string                  `xml:"userData,omitempty"`
	IamInstanceProfile  *ltIamProfileXML        `xml:"iamInstanceProfile,omitempty"`
	BlockDeviceMappings []ltBlockDeviceXML      `xml:"blockDeviceMappingSet>item,omitempty"`
	SecurityGroupIDs    []string                `xml:"securityGroupIdSet>item,omitempty"`
	MetadataOptions     *ltMetadataXML          `xml:"metadataOptions,omitempty"`
	TagSpecifications   []ltTagSpecXML          `xml:"tagSpecificationSet>item,omitempty"`
	NetworkInterfaces   []ltNetworkInterfaceXML `xml:"networkInterfaceSet>item,omitempty"`
	Monitoring          *struct {
		Enabled bool `xml:"enabled"`
	} `xml:"monitoring,omitempty"`
}

type ltVersionXML struct {
	LaunchTemplateID   string    `xml:"launchTemplateId"`
	LaunchTemplateName string    `xml:"launchTemplateName"`
	VersionNumber      int       `xml:"versionNumber"`
	CreateTime         string    `xml:"createTime"`
	CreatedBy          string    `xml:"createdBy"`
	DefaultVersion     bool      `xml:"defaultVersion"`
	LaunchTemplateData ltDataXML `xml:"launchTemplateData"`
}

type describeLaunchTemplateVersionsResponse struct {
	respHeader
	Versions  []ltVersionXML `xml:"launchTemplateVersionSet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

func (s *Server) ltDataXML(d ltData) ltDataXML {
	x := ltDataXML{ImageID: d.imageID, InstanceType: d.instanceType, UserData: d.userData, SecurityGroupIDs: d.securityGroupIDs}
	if d.iamProfileArn != "" || d.iamProfileName != "" {
		x.IamInstanceProfile = &ltIamProfileXML{Arn: d.iamProfileArn, Name: d.iamProfileName}
	}
	for _, b := range d.bdms {
		x.BlockDeviceMappings = append(x.BlockDeviceMappings, ltBlockDeviceXML{DeviceName: b.DeviceName, Ebs: ltEbsXML{
			Encrypted: b.Encrypted, DeleteOnTermination: b.DeleteOnTermination, Iops: b.IOPS, KmsKeyID: b.KMSKeyID,
			SnapshotID: b.SnapshotID, VolumeSize: b.VolumeSizeGiB, VolumeType: b.VolumeType, Throughput: b.Throughput}})
	}
	if len(d.metadata) > 0 {
		m := d.metadata
		x.MetadataOptions = &ltMetadataXML{State: "applied", HTTPTokens: m["HttpTokens"], HTTPPutResponseHopLimit: m["HttpPutResponseHopLimit"],
			HTTPEndpoint: m["HttpEndpoint"], HTTPProtocolIpv6: m["HttpProtocolIpv6"], InstanceMetadataTags: m["InstanceMetadataTags"]}
	}
	for _, rt := range slices.Sorted(maps.Keys(d.tagSpecs)) {
		x.TagSpecifications = append(x.TagSpecifications, ltTagSpecXML{ResourceType: rt, TagSet: tagSet(tagMap(d.tagSpecs[rt]))})
	}
	for _, ni := range d.nis {
		x.NetworkInterfaces = append(x.NetworkInterfaces, ltNetworkInterfaceXML{DeviceIndex: ni.deviceIndex, NetworkCardIndex: ni.networkCardIndex,
			SubnetID: ni.subnetID, InterfaceType: ni.interfaceType, AssociatePublicIPAddress: ni.associatePublicIP, Groups: ni.groups})
	}
	if d.monitoring {
		x.Monitoring = &struct {
			Enabled bool `xml:"enabled"`
		}{Enabled: true}
	}
	return x
}

// describeLaunchTemplateVersions returns version 1 of the named template
// (or of every template when none is named). LaunchTemplateVersion.N may
// ask for "1", "$Latest" or "$Default"; other versions do not exist.
func (s *Server) describeLaunchTemplateVersions(q *qnode, _ time.Time) (response, error) {
	id, name := q.str("LaunchTemplateId"), q.str("LaunchTemplateName")
	var lts []*launchTemplate
	switch {
	case id != "":
		lt := s.templates[id]
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		lts = []*launchTemplate{lt}
	case name != "":
		lt := s.templateByName(name)
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		lts = []*launchTemplate{lt}
	default:
		lts = s.sortedTemplates()
	}
	for _, v := range q.strs("LaunchTemplateVersion") {
		if v != "1" && v != "$Latest" && v != "$Default" {
			return nil, errorf("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s.", v)
		}
	}
	resp := &describeLaunchTemplateVersionsResponse{}
	for _, lt := range lts {
		resp.Versions = append(resp.Versions, ltVersionXML{LaunchTemplateID: lt.id, LaunchTemplateName: lt.name, VersionNumber: 1,
			CreateTime: timestamp(lt.created), CreatedBy: "arn:aws:iam::" + s.accountID + ":root", DefaultVersion: true,
			LaunchTemplateData: s.ltDataXML(lt.data)})
	}
	return resp, nil
}

// resolveTemplate finds the template a fleet config names (ID or name) and
// checks its version.
func (s *Server) resolveTemplate(spec *qnode) (*launchTemplate, error) {
	id, name, version := spec.str("LaunchTemplateId"), spec.str("LaunchTemplateName"), spec.str("Version")
	var lt *launchTemplate
	switch {
	case id != "":
		lt = s.templates[id]
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		lt = s.templateByName(name)
		if lt == nil {
			return nil, errorf("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, missingParameter("LaunchTemplateSpecification.LaunchTemplateId or LaunchTemplateName")
	}
	if version != "" && version != "1" && version != "$Latest" && version != "$Default" {
		if _, err := strconv.Atoi(version); err != nil {
			return nil, invalidParameterValue("Invalid launch template version: %s", version)
		}
		return nil, errorf("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s.", version, lt.id)
	}
	return lt, nil
}
