// Not built yet: issue 30 gives this section its own step.
export function TasksSection(_props: { projectId: string }) {
  return <p>This section is not built yet.</p>;
}
