{{/*
Names, labels, images, security contexts and secret references shared by the chart's templates.
*/}}

{{- define "agentplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* `<release>-<chart>`, or the release name alone when it already holds the chart name. */}}
{{- define "agentplane.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "agentplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one component: `include "agentplane.selectorLabels" (list . "operator")`. */}}
{{- define "agentplane.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "agentplane.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Every object's labels: `include "agentplane.labels" (list . "operator")`. */}}
{{- define "agentplane.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ include "agentplane.chart" $root }}
{{ include "agentplane.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: agentplane
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "agentplane.operator.fullname" -}}
{{- printf "%s-operator" (include "agentplane.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentplane.controlApi.fullname" -}}
{{- printf "%s-control-api" (include "agentplane.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentplane.operator.serviceAccountName" -}}
{{- default (include "agentplane.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "agentplane.controlApi.serviceAccountName" -}}
{{- default (include "agentplane.controlApi.fullname" .) .Values.controlPlane.serviceAccount.name }}
{{- end }}

{{- define "agentplane.operator.leaseName" -}}
{{- default (include "agentplane.operator.fullname" .) .Values.operator.leaderElection.leaseName }}
{{- end }}

{{/*
`repository@digest` or `repository:tag` of an image block with its own repository, else of `.Values.image`; the
tag defaults to the chart's appVersion. `include "agentplane.image" (list . .Values.runtime.image)`.
*/}}
{{- define "agentplane.image" -}}
{{- $root := index . 0 -}}
{{- $image := $root.Values.image -}}
{{- if (index . 1).repository }}{{ $image = index . 1 }}{{ end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end }}

{{/*
Pod Security "restricted": non-root, the runtime's default seccomp profile, no privilege escalation, no
capabilities, a read-only root filesystem (writable paths are emptyDir volumes).
*/}}
{{- define "agentplane.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "agentplane.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The Secret holding each store's credentials: the user's, or the chart's own when `create` is set. */}}
{{- define "agentplane.postgresql.secretName" -}}
{{- if .Values.postgresql.create }}{{ printf "%s-postgresql" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.postgresql.existingSecret }}{{ end }}
{{- end }}

{{- define "agentplane.redis.secretName" -}}
{{- if .Values.redis.create }}{{ printf "%s-redis" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.redis.existingSecret }}{{ end }}
{{- end }}

{{- define "agentplane.pinecone.secretName" -}}
{{- if .Values.pinecone.create }}{{ printf "%s-pinecone" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.pinecone.existingSecret }}{{ end }}
{{- end }}

{{- define "agentplane.s3.secretName" -}}
{{- if .Values.s3.create }}{{ printf "%s-s3" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.s3.existingSecret }}{{ end }}
{{- end }}

{{- define "agentplane.masterKey.secretName" -}}
{{- if .Values.controlPlane.masterKey.create }}{{ printf "%s-master-key" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.controlPlane.masterKey.existingSecret }}{{ end }}
{{- end }}

{{- define "agentplane.owner.secretName" -}}
{{- if .Values.controlPlane.owner.create }}{{ printf "%s-owner" (include "agentplane.fullname" .) }}{{ else }}{{ .Values.controlPlane.owner.existingSecret }}{{ end }}
{{- end }}

{{/* An env entry read from a Secret: `include "agentplane.secretEnv" (list "NAME" secretName key)`. */}}
{{- define "agentplane.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 | quote }}
      key: {{ index . 2 | quote }}
{{- end }}

{{/* Where clients reach the control plane, or nothing. */}}
{{- define "agentplane.controlApi.publicUrl" -}}
{{- if .Values.controlPlane.publicUrl }}{{ .Values.controlPlane.publicUrl }}{{ else if .Values.controlPlane.host }}{{ printf "%s://%s" .Values.dataPlane.scheme .Values.controlPlane.host }}{{ end }}
{{- end }}

{{/* Combinations the schema cannot express; each stops the install with what to change (rendered by validate.yaml). */}}
{{- define "agentplane.validate" -}}
{{- $v := .Values -}}
{{- if and (gt (int $v.operator.replicas) 1) (not $v.operator.leaderElection.enabled) }}
{{- fail "operator.replicas > 1 needs operator.leaderElection.enabled: two operators would both write" }}
{{- end }}
{{- if ge (int $v.operator.leaderElection.renewSeconds) (int $v.operator.leaderElection.leaseSeconds) }}
{{- fail "operator.leaderElection.renewSeconds must be shorter than leaseSeconds" }}
{{- end }}
{{- $postgresql := or $v.postgresql.existingSecret $v.postgresql.create }}
{{- if and (gt (int $v.controlPlane.replicas) 1) (not $postgresql) }}
{{- fail "controlPlane.replicas > 1 needs postgresql (postgresql.existingSecret): the embedded database belongs to one Pod" }}
{{- end }}
{{- if and $postgresql (not (or $v.controlPlane.masterKey.existingSecret $v.controlPlane.masterKey.create)) }}
{{- fail "postgresql needs controlPlane.masterKey.existingSecret (a Secret with a 32-byte base64 key: openssl rand -base64 32): a key generated per Pod would make sealed secrets unreadable to the others" }}
{{- end }}
{{- if and $v.controlPlane.ingress.enabled (not $v.controlPlane.host) }}
{{- fail "controlPlane.ingress.enabled needs controlPlane.host" }}
{{- end }}
{{- range $store := list "postgresql" "redis" "s3" "pinecone" }}
{{- $values := index $v $store }}
{{- if and $values.create $values.existingSecret }}
{{- fail (printf "%s: set existingSecret or create, not both" $store) }}
{{- end }}
{{- end }}
{{- if and $v.controlPlane.masterKey.create $v.controlPlane.masterKey.existingSecret }}
{{- fail "controlPlane.masterKey: set existingSecret or create, not both" }}
{{- end }}
{{- if and $v.controlPlane.owner.create $v.controlPlane.owner.existingSecret }}
{{- fail "controlPlane.owner: set existingSecret or create, not both" }}
{{- end }}
{{- if and (or $v.s3.existingSecret $v.s3.create) (not $v.s3.bucket) }}
{{- fail "s3 credentials are set but s3.bucket is not" }}
{{- end }}
{{- if and $v.pinecone.indexHost (not (or $v.pinecone.existingSecret $v.pinecone.create)) }}
{{- fail "pinecone.indexHost needs pinecone.existingSecret (a Secret with the API key) or, for development, pinecone.create" }}
{{- end }}
{{- if and (or $v.pinecone.existingSecret $v.pinecone.create) (not $v.pinecone.indexHost) }}
{{- fail "pinecone credentials are set but pinecone.indexHost is not" }}
{{- end }}
{{- end }}
