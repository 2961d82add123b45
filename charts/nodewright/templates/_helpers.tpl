{{/* The forwarder's name: every object of the chart is named after it, as in forwarder/deploy. */}}
{{- define "nodewright.name" -}}nodewright-forwarder{{- end -}}

{{- define "nodewright.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ include "nodewright.name" . }}{{- else -}}{{ required "serviceAccount.name: required when serviceAccount.create is false" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{/* Selector labels: the same as forwarder/deploy's, which selectors (immutable) already use. */}}
{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodewright.name" . }}
{{- end -}}

{{- define "nodewright.labels" -}}
{{ include "nodewright.selectorLabels" . }}
app.kubernetes.io/part-of: nodewright
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The image, pinned by digest; fails with the field's name when a value is missing or malformed. */}}
{{- define "nodewright.image" -}}
{{- $repo := required "image.repository: required (the stack's ForwarderImageRepositoryUri output, where make image-push pushed the image)" .Values.image.repository -}}
{{- $digest := required "image.digest: required (sha256:..., printed by make image and kept in dist/image/digest)" .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" $digest) -}}
{{- fail (printf "image.digest %q: want sha256:<64 hex digits> (the image is pinned by digest, never by tag)" $digest) -}}
{{- end -}}
{{- if contains "@" $repo -}}
{{- fail (printf "image.repository %q: give the repository without a tag or digest (the digest goes in image.digest)" $repo) -}}
{{- end -}}
{{- printf "%s@%s" $repo $digest -}}
{{- end -}}

{{/* Settings checks: every problem names its value. */}}
{{- define "nodewright.checkSettings" -}}
{{- $s := .Values.settings -}}
{{- $_ := required "settings.clusterName: required (the -c clusterName of cdk deploy)" $s.clusterName -}}
{{- $endpoint := required "settings.apiEndpoint: required (the stack's ApiEndpoint output)" $s.apiEndpoint -}}
{{- if not (regexMatch "^https?://[^/]+" $endpoint) -}}
{{- fail (printf "settings.apiEndpoint %q: not an absolute URL" $endpoint) -}}
{{- end -}}
{{- range $k, $v := $s.featureGates -}}
{{- fail (printf "settings.featureGates.%s: nodewright's Lambdas apply feature gates, so they are set on the CDK stack (cdk deploy -c featureGates=Name=true,...); remove it here" $k) -}}
{{- end -}}
{{- if not (has .Values.logLevel (list "debug" "info" "warn" "error")) -}}
{{- fail (printf "logLevel %q: want debug, info, warn or error" .Values.logLevel) -}}
{{- end -}}
{{- end -}}
