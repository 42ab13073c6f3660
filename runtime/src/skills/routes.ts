// HTTP adapters for skill packages: an end-user's own (`POST`, `GET /plugins`, `DELETE /plugins/{id}`; uploading
// needs `plugins:write`) and the project's on the admin surface, for the control plane's
// `/api/projects/:id/skills` (X-Admin-Key). A package comes as a form: `file` (a .zip, a .tar.gz or a SKILL.md), or
// `files` parts each named by its path.
import { z } from 'zod';
import { invalidArgument } from '@agentplane/lib/errors';
import { defineRoute, type RouteDefinition, type RouteInput } from '@agentplane/lib/http/routes';
import { principalOf } from '../auth/guard.js';
import type { TenantService } from '../tenants/service.js';
import { MAX_PACKAGE_BYTES, MAX_PACKAGE_FILES, type PackageUpload } from './archive.js';
import type { SkillService } from './service.js';

const PluginOut = z
  .object({
    id: z.uuid(),
    name: z.string().meta({ description: "plugin.json's name, the archive's, or the first skill's" }),
    visibility: z.enum(['project', 'private']).meta({ description: '`project`: every end-user of the project; `private`: its uploader alone' }),
    owner_subject: z.string().nullable().meta({ description: 'Who uploaded it; null for the project\'s' }),
    skills: z.array(z.object({ name: z.string(), description: z.string() })),
    mcp_servers: z.array(z.string()),
    warnings: z.array(z.string()).meta({ description: 'What was left out, named: skipped files, skills without frontmatter, refused stdio servers' }),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'Plugin' });

const PluginList = z.object({ plugins: z.array(PluginOut) }).meta({ id: 'PluginList' });
const multipart = {
  file: 'file',
  maxFileBytes: MAX_PACKAGE_BYTES,
  tooLargeHint: `a package is at most ${MAX_PACKAGE_BYTES / 1024 / 1024} MiB`,
  repeated: { name: 'files', maxParts: MAX_PACKAGE_FILES },
  fields: z.object({}),
};
const PluginParams = z.object({ plugin_id: z.uuid({ error: 'plugin_id must be a UUID' }).overwrite((id) => id.toLowerCase()) });
const tenantId = z.uuid({ error: 'tenant_id must be a UUID' }).overwrite((id) => id.toLowerCase());
const uploadDescription =
  `A form: part \`file\` (a .zip, a .tar.gz or a single SKILL.md, at most ${MAX_PACKAGE_BYTES / 1024 / 1024} MiB), or parts \`files\` each named by its path in the package ` +
  `(at most ${MAX_PACKAGE_FILES}). A skill is a file named exactly SKILL.md whose YAML frontmatter has \`name\` and \`description\`; it is published under that name.`;

/** The package a form carries; a 400 for a request that is not a form. */
function uploadOf(form: RouteInput<unknown, unknown, unknown>['form']): PackageUpload {
  if (!form) throw invalidArgument('request body: a skill package is sent as a form (Content-Type: multipart/form-data)');
  if (form.files.length > 0 && form.file) throw invalidArgument('send either a file part or files parts, not both');
  return form.files.length > 0
    ? { files: form.files.map((part) => ({ path: part.filename ?? '', bytes: part.bytes })) }
    : form.file
      ? { file: { filename: form.file.filename, bytes: form.file.bytes } }
      : {};
}

export function pluginRoutes(skills: SkillService, tenants: TenantService): RouteDefinition[] {
  const refused = { description: 'A package with no skill, a hostile archive (a path leaving it, a link, too large or too many files), or not a form' };
  return [
    defineRoute({
      method: 'get',
      path: '/plugins',
      operationId: 'listPlugins',
      summary: "The project's skill packages and this person's own",
      tags: ['skills'],
      security: ['bearer'],
      responses: { 200: { description: 'Oldest first', schema: PluginList }, 401: { description: 'Missing, invalid or expired token' } },
      async handle({ res }) {
        return { body: { plugins: await skills.listVisible(principalOf(res)) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/plugins',
      operationId: 'uploadPlugin',
      summary: 'Upload a skill package for this person alone (capability `plugins:write`), on top of the project\'s',
      description: uploadDescription,
      tags: ['skills'],
      security: ['bearer'],
      multipart,
      responses: {
        201: { description: 'Published; `warnings` names what was left out', schema: PluginOut },
        400: refused,
        401: { description: 'Missing, invalid or expired token' },
        403: { description: 'The token lacks capability `plugins:write`' },
        409: { description: 'A skill of that name is already yours (`code` `name_taken`)' },
        413: { description: 'The form is larger than a package may be' },
      },
      authorize: ({ res }) => skills.authorizeUpload(principalOf(res)),
      async handle({ form, res }) {
        return { status: 201, body: await skills.uploadOwn(principalOf(res), uploadOf(form)) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/plugins/{plugin_id}',
      operationId: 'deletePlugin',
      summary: 'Remove one of this person\'s own skill packages',
      tags: ['skills'],
      security: ['bearer'],
      params: PluginParams,
      responses: {
        200: { description: 'Removed', schema: PluginOut },
        401: { description: 'Missing, invalid or expired token' },
        403: { description: 'The token lacks capability `plugins:write`, or the package is the project\'s (`code` `not_owner`): it is removed on the control plane' },
        404: { description: 'No such package, or another person\'s' },
      },
      // Removing is writing: a read-only token of the same person may not.
      authorize: ({ res }) => skills.authorizeUpload(principalOf(res)),
      async handle({ params, res }) {
        return { body: await skills.removeOwn(principalOf(res), params.plugin_id) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tenants/{tenant_id}/plugins',
      operationId: 'listTenantPlugins',
      summary: "Every skill package of the tenant: the project's and each end-user's own",
      tags: ['tenants'],
      security: ['adminKey'],
      params: z.object({ tenant_id: tenantId }),
      responses: { 200: { description: 'Oldest first', schema: PluginList }, 401: { description: 'Missing or wrong X-Admin-Key' }, 404: { description: 'No such tenant' } },
      async handle({ params }) {
        return { body: { plugins: await skills.listAll(await tenants.existing(params.tenant_id)) } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/tenants/{tenant_id}/plugins',
      operationId: 'uploadTenantPlugin',
      summary: "Upload a skill package for the whole project",
      description: uploadDescription,
      tags: ['tenants'],
      security: ['adminKey'],
      params: z.object({ tenant_id: tenantId }),
      multipart,
      responses: {
        201: { description: 'Published', schema: PluginOut },
        400: refused,
        401: { description: 'Missing or wrong X-Admin-Key' },
        404: { description: 'No such tenant' },
        409: { description: 'A skill of that name is already the project\'s (`code` `name_taken`)' },
        413: { description: 'The form is larger than a package may be' },
      },
      authorize: async ({ params }) => void (await tenants.existing(params.tenant_id)),
      async handle({ params, form }) {
        return { status: 201, body: await skills.uploadProject(params.tenant_id, uploadOf(form)) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tenants/{tenant_id}/plugins/{plugin_id}',
      operationId: 'deleteTenantPlugin',
      summary: 'Remove a skill package of the tenant (the project\'s, or an end-user\'s)',
      tags: ['tenants'],
      security: ['adminKey'],
      params: z.object({ tenant_id: tenantId, plugin_id: PluginParams.shape.plugin_id }),
      responses: { 200: { description: 'Removed', schema: PluginOut }, 401: { description: 'Missing or wrong X-Admin-Key' }, 404: { description: 'No such tenant or package' } },
      async handle({ params }) {
        return { body: await skills.removeAny(await tenants.existing(params.tenant_id), params.plugin_id) };
      },
    }),
  ];
}
