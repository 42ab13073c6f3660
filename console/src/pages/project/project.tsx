// One project: its name and id, a navigation between its sections, and the section the path names (the overview,
// with the readiness checklist, when it names none). Each section is a component of its own in this folder.
import { useEffect, useRef } from 'react';
import { Link } from 'wouter';
import { ErrorMessage } from '../../components/error-message.js';
import { useProject } from '../../queries.js';
import { sections } from './sections.js';

export function ProjectPage({ projectId, section }: { projectId: string; section: string | undefined }) {
  const project = useProject(projectId);
  const current = sections.find((candidate) => candidate.id === (section ?? 'overview'));
  const heading = useRef<HTMLHeadingElement>(null);
  // A new section replaces the content the focus was in: its heading takes it, and the title says where one is.
  useEffect(() => {
    heading.current?.focus();
    if (project.data && current) document.title = `${current.label} · ${project.data.name} · agentplane console`;
  }, [current, project.data]);

  return (
    <div className="project">
      <nav aria-label="Project sections" className="sections">
        <p className="project-name">{project.data?.name ?? 'Project'}</p>
        <ul>
          {sections.map((candidate) => (
            <li key={candidate.id}>
              <Link href={`/projects/${projectId}/${candidate.id}`} aria-current={candidate === current ? 'page' : undefined}>
                {candidate.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        <ErrorMessage error={project.error} />
        {current ? (
          <>
            <h1 ref={heading} tabIndex={-1}>
              {current.label}
            </h1>
            {project.data ? (
              <p className="note">
                {project.data.name} <code>{projectId}</code>
              </p>
            ) : null}
            <current.Component projectId={projectId} />
          </>
        ) : (
          <>
            <h1 ref={heading} tabIndex={-1}>
              No such section
            </h1>
            <p>
              <Link href={`/projects/${projectId}`}>Back to the overview</Link>
            </p>
          </>
        )}
      </main>
    </div>
  );
}
