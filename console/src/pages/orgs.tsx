// The signed-in account's orgs, each with its projects and a form to make one.
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { useCreateProject, useMe, useOrgProjects, type Me } from '../queries.js';
import { QueryState } from '../components/query-state.js';
import { ErrorMessage } from '../components/error-message.js';

type Org = Me['orgs'][number];

function NewProjectForm({ org }: { org: Org }) {
  const create = useCreateProject(org.id);
  const [name, setName] = useState('');
  const inputId = `new-project-${org.id}`;

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    create.mutate(name.trim(), { onSuccess: () => setName('') });
  }

  return (
    <form onSubmit={submit} className="inline">
      <label htmlFor={inputId}>New project name</label>
      <input id={inputId} value={name} onChange={(event) => setName(event.target.value)} required maxLength={200} />
      <button type="submit" disabled={create.isPending}>
        Make project
      </button>
      <p role="status" className="note">
        {create.isSuccess ? `Made project ${create.data.name}.` : ''}
      </p>
      <ErrorMessage error={create.error} />
    </form>
  );
}

function OrgProjects({ org }: { org: Org }) {
  const projects = useOrgProjects(org.id);
  const headingId = `org-${org.id}`;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>
        {org.name} <span className="note">({org.role})</span>
      </h2>
      <QueryState query={projects} what="projects" />
      {projects.data?.length === 0 ? <p>No projects yet.</p> : null}
      {projects.data && projects.data.length > 0 ? (
        <ul aria-label={`Projects of ${org.name}`}>
          {projects.data.map((project) => (
            <li key={project.id}>
              <Link href={`/projects/${project.id}`} className="name">
                {project.name}
              </Link>{' '}
              <code>{project.id}</code>
            </li>
          ))}
        </ul>
      ) : null}
      <NewProjectForm org={org} />
    </section>
  );
}

export function OrgsPage() {
  const me = useMe();
  const heading = useRef<HTMLHeadingElement>(null);
  // Signing in replaces the form the focus was in: the page's heading takes it.
  useEffect(() => {
    heading.current?.focus();
    document.title = 'Organizations · agentplane console';
  }, []);

  return (
    <main>
      <h1 ref={heading} tabIndex={-1}>
        Organizations
      </h1>
      <QueryState query={me} what="Loading" />
      {me.data?.orgs.map((org) => <OrgProjects key={org.id} org={org} />)}
    </main>
  );
}
