[[- /*
Helpers of the berth pack. Only what is inside a define renders.
*/ -]]

[[- define "job_name" -]]
[[ coalesce (var "job_name" .) (meta "pack.name" .) ]]
[[- end -]]

[[- /* The --source berth reconciles, and its git flags. */ -]]
[[- define "source_args" -]]
[[- if eq (var "specs_from" .) "git-sync" -]]
"--source", "${NOMAD_ALLOC_DIR}/specs/current",
[[- else if eq (var "specs_from" .) "berth" -]]
"--source", [[ required "specs_repo: the spec repository's git URL" (var "specs_repo" .) | quote ]],
[[- if ne (var "specs_ref" .) "HEAD" ]] "--branch", [[ var "specs_ref" . | quote ]],[[ end ]]
[[- else -]]
[[ fail "specs_from: git-sync or berth" ]]
[[- end -]]
[[- end -]]

