package ec2sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Owners of the public EKS-optimized images (the account IDs DescribeImages
// reports for them in commercial regions).
const (
	ownerEKS          = "602401143452"
	ownerBottlerocket = "092701018921"
	ownerWindows      = "801119661308"
)

// Image is an AMI the simulator knows.
type Image struct {
	// ID is "ami-" + 17 hex digits; AddImage derives it from Name when empty.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Description is free text.
	Description string `json:"description"`
	// Architecture is "x86_64" or "arm64".
	Architecture string `json:"architecture"`
	// OwnerID is the owning account; AddImage defaults it to Options.AccountID.
	OwnerID string `json:"ownerId"`
	// OwnerAlias is "amazon" for Amazon-published images, else "".
	OwnerAlias string `json:"ownerAlias"`
	// Platform is "windows" for Windows images, else "".
	Platform string `json:"platform"`
	// CreationDate is when the image was registered.
	CreationDate time.Time `json:"creationDate"`
	// DeprecationTime is when the image is deprecated; zero means never.
	DeprecationTime time.Time `json:"deprecationTime"`
	// Public images are visible to every account.
	Public bool `json:"public"`
	// RootDeviceName is the root volume's device, e.g. "/dev/xvda".
	RootDeviceName string `json:"rootDeviceName"`
	// RootVolumeGiB is the size of the image's root snapshot.
	RootVolumeGiB int               `json:"rootVolumeGiB"`
	Tags          map[string]string `json:"tags"`
}

// image is a stored AMI.
type image struct {
	Image
}

// parameter is a stored SSM parameter.
type parameter struct {
	name, value string
	version     int64
	modified    time.Time
}

// release is one published version of an image family.
type release struct {
	version string
	created time.Time
}

// The seeded releases: an older one (deprecated) and a current one. The
// pinned versions of Karpenter's documentation (al2023@v20240807) resolve to
// the older one.
var (
	eksReleases = []release{
		{"v20240807", time.Date(2024, 8, 7, 22, 10, 4, 0, time.UTC)},
		{"v20250920", time.Date(2025, 9, 20, 23, 41, 52, 0, time.UTC)},
	}
	bottlerocketReleases = []release{
		{"1.24.0", time.Date(2024, 8, 8, 18, 2, 11, 0, time.UTC)},
		{"1.46.0", time.Date(2025, 9, 18, 20, 15, 37, 0, time.UTC)},
	}
	windowsRelease = release{"2025.09.10", time.Date(2025, 9, 10, 9, 30, 0, 0, time.UTC)}
	// oldDeprecation is when the older releases were deprecated.
	oldDeprecation = time.Date(2025, 8, 7, 0, 0, 0, 0, time.UTC)
)

// parseMinor splits "1.33" into 1 and 33.
func parseMinor(v string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	major, errA := strconv.Atoi(a)
	minor, errB := strconv.Atoi(b)
	return major, minor, errA == nil && errB == nil && major >= 1 && minor >= 0
}

// seedImages registers, per Kubernetes version, the EKS-optimized AMIs of
// every family with their public SSM parameters (karpenter-spec §9.1):
// AL2023 (x86_64 standard/nvidia/neuron, arm64 standard/nvidia), AL2 (only
// below 1.33, where EKS still publishes it), Bottlerocket (standard and
// nvidia, both architectures) and Windows Server 2019/2022 (2025 from
// 1.35), each in an older deprecated release and a current one (Windows:
// current only).
func (s *Server) seedImages() {
	for _, k8s := range s.k8s {
		_, minor, _ := parseMinor(k8s)
		base := "/aws/service/eks/optimized-ami/" + k8s
		for i, rel := range eksReleases {
			latest := i == len(eksReleases)-1
			for _, v := range []struct{ arch, variant string }{
				{"x86_64", "standard"}, {"x86_64", "nvidia"}, {"x86_64", "neuron"},
				{"arm64", "standard"}, {"arm64", "nvidia"},
			} {
				name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", v.arch, v.variant, k8s, rel.version)
				img := s.seedImage(name, fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: %s)", k8s, v.variant),
					v.arch, ownerEKS, "", rel, latest, "/dev/xvda", 20)
				dir := fmt.Sprintf("%s/amazon-linux-2023/%s/%s", base, v.arch, v.variant)
				s.putParam(dir+"/"+name+"/image_id", img.ID, rel.created)
				if latest {
					s.putParam(dir+"/recommended/image_id", img.ID, rel.created)
				}
			}
			if minor < 33 {
				for _, v := range []struct{ arch, path, prefix string }{
					{"x86_64", "amazon-linux-2", "amazon-eks-node"},
					{"arm64", "amazon-linux-2-arm64", "amazon-eks-arm64-node"},
					{"x86_64", "amazon-linux-2-gpu", "amazon-eks-gpu-node"},
				} {
					name := fmt.Sprintf("%s-%s-%s", v.prefix, k8s, rel.version)
					img := s.seedImage(name, fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", k8s),
						v.arch, ownerEKS, "", rel, latest, "/dev/xvda", 20)
					s.putParam(fmt.Sprintf("%s/%s/%s/image_id", base, v.path, name), img.ID, rel.created)
					if latest {
						s.putParam(fmt.Sprintf("%s/%s/recommended/image_id", base, v.path), img.ID, rel.created)
					}
				}
			}
		}
		for i, rel := range bottlerocketReleases {
			latest := i == len(bottlerocketReleases)-1
			for _, variant := range []string{"", "-nvidia"} {
				for _, arch := range []string{"x86_64", "arm64"} {
					name := fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s-%s", k8s, variant, arch, rel.version, hashHex("br/"+rel.version, 8))
					img := s.seedImage(name, fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s", k8s, variant, arch, rel.version),
						arch, ownerBottlerocket, "", rel, latest, "/dev/xvda", 2)
					dir := fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s", k8s, variant, arch)
					s.putParam(dir+"/"+rel.version+"/image_id", img.ID, rel.created)
					if latest {
						s.putParam(dir+"/latest/image_id", img.ID, rel.created)
					}
				}
			}
		}
		for _, year := range []string{"2019", "2022", "2025"} {
			if year == "2025" && minor < 35 {
				continue
			}
			series := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s", year, k8s)
			img := s.seedImage(series+"-"+windowsRelease.version, "Microsoft Windows Server "+year+" Core optimized for EKS and provided by Amazon",
				"x86_64", ownerWindows, "windows", windowsRelease, true, "/dev/sda1", 50)
			s.putParam("/aws/service/ami-windows-latest/"+series+"/image_id", img.ID, windowsRelease.created)
		}
	}
}

func (s *Server) seedImage(name, description, arch, owner, platform string, rel release, latest bool, root string, rootGiB int) *image {
	img := &image{Image{
		ID: "ami-" + hashHex("ami/"+s.region+"/"+name, 17), Name: name, Description: description, Architecture: arch,
		OwnerID: owner, OwnerAlias: "amazon", Platform: platform, CreationDate: rel.created, Public: true,
		RootDeviceName: root, RootVolumeGiB: rootGiB, Tags: map[string]string{},
	}}
	if latest {
		img.DeprecationTime = rel.created.AddDate(2, 0, 0)
	} else {
		img.DeprecationTime = oldDeprecation
	}
	s.images = append(s.images, img)
	return img
}

func (s *Server) putParam(name, value string, modified time.Time) {
	if p, ok := s.params[name]; ok {
		p.value, p.modified = value, modified
		p.version++
		return
	}
	s.params[name] = &parameter{name: name, value: value, version: 1, modified: modified}
}

func (s *Server) imageByID(id string) *image {
	for _, img := range s.images {
		if img.ID == id {
			return img
		}
	}
	return nil
}

// AddImage registers an AMI (e.g. a newer release behind an alias, or a
// custom image for amiSelectorTerms) and returns it with defaults filled:
// ID from the name, owner Options.AccountID, architecture x86_64, root
// device /dev/xvda of 20 GiB, creation now. It fails when Name is empty or
// the ID is taken.
func (s *Server) AddImage(img Image) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if img.Name == "" {
		return Image{}, fmt.Errorf("image: name required")
	}
	if img.ID == "" {
		img.ID = "ami-" + hashHex("ami/"+s.region+"/"+img.Name, 17)
	}
	if s.imageByID(img.ID) != nil {
		return Image{}, fmt.Errorf("image %s: already exists", img.ID)
	}
	if img.OwnerID == "" {
		img.OwnerID = s.accountID
	}
	if img.Architecture == "" {
		img.Architecture = "x86_64"
	}
	if img.RootDeviceName == "" {
		img.RootDeviceName = "/dev/xvda"
	}
	if img.RootVolumeGiB == 0 {
		img.RootVolumeGiB = 20
	}
	if img.CreationDate.IsZero() {
		img.CreationDate = s.clock.Now().UTC().Truncate(time.Second)
	}
	img.Tags = maps.Clone(img.Tags)
	if img.Tags == nil {
		img.Tags = map[string]string{}
	}
	s.images = append(s.images, &image{img})
	return img, nil
}

// PutParameter creates or overwrites an SSM parameter (a new version each
// time), e.g. to point a "recommended" or "latest" alias at a new image.
func (s *Server) PutParameter(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putParam(name, value, s.clock.Now())
}

// Images returns every registered AMI, sorted by name.
func (s *Server) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Image, 0, len(s.images))
	for _, img := range s.images {
		c := img.Image
		c.Tags = maps.Clone(c.Tags)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Parameters returns every SSM parameter name with its value.
func (s *Server) Parameters() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.params))
	for k, p := range s.params {
		out[k] = p.value
	}
	return out
}

type imageBlockDeviceXML struct {
	DeviceName string      `xml:"deviceName"`
	Ebs        imageEbsXML `xml:"ebs"`
}

type imageEbsXML struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type imageXML struct {
	ImageID            string                `xml:"imageId"`
	ImageLocation      string                `xml:"imageLocation"`
	ImageState         string                `xml:"imageState"`
	ImageOwnerID       string                `xml:"imageOwnerId"`
	CreationDate       string                `xml:"creationDate"`
	IsPublic           bool                  `xml:"isPublic"`
	Architecture       string                `xml:"architecture"`
	ImageType          string                `xml:"imageType"`
	Platform           string                `xml:"platform,omitempty"`
	PlatformDetails    string                `xml:"platformDetails"`
	UsageOperation     string                `xml:"usageOperation"`
	ImageOwnerAlias    string                `xml:"imageOwnerAlias,omitempty"`
	Name               string                `xml:"name"`
	Description        string                `xml:"description,omitempty"`
	RootDeviceType     string                `xml:"rootDeviceType"`
	RootDeviceName     string                `xml:"rootDeviceName"`
	BlockDeviceMapping []imageBlockDeviceXML `xml:"blockDeviceMapping>item"`
	VirtualizationType string                `xml:"virtualizationType"`
	Hypervisor         string                `xml:"hypervisor"`
	EnaSupport         bool                  `xml:"enaSupport"`
	SriovNetSupport    string                `xml:"sriovNetSupport"`
	BootMode           string                `xml:"bootMode,omitempty"`
	DeprecationTime    string                `xml:"deprecationTime,omitempty"`
	TagSet             []tagXML              `xml:"tagSet>item,omitempty"`
}

type describeImagesResponse struct {
	respHeader
	Images    []imageXML `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

// timestamp renders a time as EC2 does (ISO 8601, UTC, milliseconds).
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// validAMIID reports whether id looks like an AMI ID.
func validAMIID(id string) bool {
	rest, ok := strings.CutPrefix(id, "ami-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	for _, c := range rest {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// describeImages follows EC2 DescribeImages: ImageId.N (malformed IDs fail
// with InvalidAMIID.Malformed, unknown ones with InvalidAMIID.NotFound),
// Owner.N ("self", "amazon" or account IDs), filters, and
// IncludeDeprecated — deprecated images are omitted unless it is true,
// image IDs are given, or the caller owns them.
// filterField is the values of DescribeImages filter name for img (nil for
// a name it does not know).
func (img *image) filterField(name string) []string {
	switch name {
	case "image-id":
		return []string{img.ID}
	case "name":
		return []string{img.Name}
	case "owner-id":
		return []string{img.OwnerID}
	case "owner-alias":
		return []string{img.OwnerAlias}
	case "architecture":
		return []string{img.Architecture}
	case "state":
		return []string{"available"}
	case "is-public":
		return boolStr(img.Public)
	case "platform":
		return []string{img.Platform}
	case "image-type":
		return []string{"machine"}
	case "description":
		return []string{img.Description}
	case "root-device-type":
		return []string{"ebs"}
	case "virtualization-type":
		return []string{"hvm"}
	case "hypervisor":
		return []string{"xen"}
	}
	return nil
}

func (s *Server) describeImages(q *qnode, now time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"image-id", "name", "owner-id", "owner-alias", "architecture", "state",
		"is-public", "platform", "image-type", "description", "root-device-type", "virtualization-type", "hypervisor"}, true)
	if err != nil {
		return nil, err
	}
	includeDeprecated, _, err := q.boolParam("IncludeDeprecated")
	if err != nil {
		return nil, err
	}
	ids := q.strs("ImageId")
	for _, id := range ids {
		if !validAMIID(id) {
			return nil, errorf("InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
	}
	var missing []string
	for _, id := range ids {
		if s.imageByID(id) == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errorf("InvalidAMIID.NotFound", "The image ids '[%s]' do not exist", strings.Join(missing, ", "))
	}
	owners := q.strs("Owner")
	var out []imageXML
	for _, img := range s.images {
		if len(ids) > 0 && !slices.Contains(ids, img.ID) {
			continue
		}
		if len(owners) > 0 && !slices.ContainsFunc(owners, func(o string) bool {
			return o == img.OwnerID || o == "self" && img.OwnerID == s.accountID || o != "" && o == img.OwnerAlias
		}) {
			continue
		}
		if !img.Public && img.OwnerID != s.accountID {
			continue
		}
		deprecated := !img.DeprecationTime.IsZero() && !now.Before(img.DeprecationTime)
		if deprecated && !includeDeprecated && len(ids) == 0 && img.OwnerID != s.accountID {
			continue
		}
		platformDetails, usage := "Linux/UNIX", "RunInstances"
		if img.Platform == "windows" {
			platformDetails, usage = "Windows", "RunInstances:0002"
		}
		if !matches(filters, img.Tags, img.filterField) {
			continue
		}
		x := imageXML{
			ImageID: img.ID, ImageLocation: "amazon/" + img.Name, ImageState: "available", ImageOwnerID: img.OwnerID,
			CreationDate: timestamp(img.CreationDate), IsPublic: img.Public, Architecture: img.Architecture, ImageType: "machine",
			Platform: img.Platform, PlatformDetails: platformDetails, UsageOperation: usage, ImageOwnerAlias: img.OwnerAlias,
			Name: img.Name, Description: img.Description, RootDeviceType: "ebs", RootDeviceName: img.RootDeviceName,
			BlockDeviceMapping: []imageBlockDeviceXML{{DeviceName: img.RootDeviceName, Ebs: imageEbsXML{
				SnapshotID: "snap-" + hashHex("snap/"+img.ID, 17), VolumeSize: img.RootVolumeGiB, DeleteOnTermination: true, VolumeType: "gp2"}}},
			VirtualizationType: "hvm", Hypervisor: "xen", EnaSupport: true, SriovNetSupport: "simple", TagSet: tagSet(img.Tags),
		}
		if img.Architecture == "arm64" {
			x.BootMode = "uefi"
		}
		if !img.DeprecationTime.IsZero() {
			x.DeprecationTime = timestamp(img.DeprecationTime)
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b imageXML) int { return strings.Compare(a.Name, b.Name) })
	p, err := paginate(q, "DescribeImages", len(out), 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	return &describeImagesResponse{Images: out[p.start:p.end], NextToken: p.next}, nil
}
