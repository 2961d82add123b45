package amifamily

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"

	"sigs.k8s.io/yaml"
)

// MIME content types of user-data parts (cloud-init; nodeadm's
// application/node.eks.aws, per the AL2023 "nodeadm" documentation).
const (
	contentTypeShell       = `text/x-shellscript; charset="us-ascii"`
	contentTypeCloudConfig = `text/cloud-config; charset="us-ascii"`
	contentTypeNodeConfig  = "application/node.eks.aws"
)

// boundary is the multipart boundary Karpenter's AL2 and AL2023 user data use
// (karpenter-spec §9.5).
const boundary = "//"

// mimePart is one part of a multipart user-data archive.
type mimePart struct {
	// headers are the part's header lines, Content-Type first.
	headers []string
	content string
}

// userParts splits user data into MIME parts: the parts of a MIME multipart
// archive, a NodeConfig YAML document (when nodeConfig is true), a
// cloud-config document, or otherwise a shell script. Empty user data has
// no parts. Data that declares itself MIME but does not parse is an error
// wrapping ErrInvalidUserData.
func userParts(data string, nodeConfig bool) ([]mimePart, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	if looksMIME(data) {
		parts, err := parseMIME(data)
		if err != nil {
			return nil, fmt.Errorf("user data: MIME archive: %w: %w", err, ErrInvalidUserData)
		}
		return parts, nil
	}
	switch {
	case nodeConfig && isNodeConfig(data):
		return []mimePart{{headers: []string{"Content-Type: " + contentTypeNodeConfig}, content: data}}, nil
	case strings.HasPrefix(data, "#cloud-config"):
		return []mimePart{{headers: []string{"Content-Type: " + contentTypeCloudConfig}, content: data}}, nil
	}
	return []mimePart{{headers: []string{"Content-Type: " + contentTypeShell}, content: data}}, nil
}

// looksMIME reports whether data starts with a MIME header.
func looksMIME(data string) bool {
	first, _, _ := strings.Cut(strings.TrimLeft(data, "\n"), "\n")
	first = strings.ToLower(first)
	return strings.HasPrefix(first, "mime-version:") || strings.HasPrefix(first, "content-type:")
}

// parseMIME reads a multipart archive, keeping each part's Content-Type and
// Content-Transfer-Encoding headers and its raw body.
func parseMIME(data string) ([]mimePart, error) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(data, "\n")))
	if err != nil {
		return nil, err
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("content-type: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return nil, fmt.Errorf("content-type %q: want multipart with a boundary", mediaType)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []mimePart
	for {
		p, err := r.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		part := mimePart{content: string(body)}
		ct := p.Header.Get("Content-Type")
		if ct == "" {
			ct = contentTypeShell
		}
		part.headers = append(part.headers, "Content-Type: "+ct)
		if te := p.Header.Get("Content-Transfer-Encoding"); te != "" {
			part.headers = append(part.headers, "Content-Transfer-Encoding: "+te)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("no parts")
	}
	return parts, nil
}

// isNodeConfig reports whether data is a YAML nodeadm NodeConfig
// (apiVersion node.eks.aws/*, kind NodeConfig).
func isNodeConfig(data string) bool {
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
		return false
	}
	return doc.Kind == "NodeConfig" && strings.HasPrefix(doc.APIVersion, "node.eks.aws/")
}

// renderMIME writes parts as a multipart/mixed archive with boundary "//".
func renderMIME(parts []mimePart) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\n")
	b.WriteString(`Content-Type: multipart/mixed; boundary="` + boundary + `"` + "\n\n")
	for _, p := range parts {
		b.WriteString("--" + boundary + "\n")
		for _, h := range p.headers {
			b.WriteString(h + "\n")
		}
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(p.content, "\n"))
		b.WriteString("\n\n")
	}
	b.WriteString("--" + boundary + "--\n")
	return b.String()
}
