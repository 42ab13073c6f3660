// The sections of a project's page, in the order its navigation lists them. A section is a component given the
// project's id; it fetches what it shows through the hooks in ../../queries.ts or its own.
import type { ComponentType } from 'react';
import { OverviewSection } from './overview.js';
import { KeysSection } from './keys.js';
import { ProvidersSection } from './providers.js';
import { PlaygroundSection } from './playground.js';
import { SessionsSection } from './sessions.js';
import { DocumentsSection } from './documents.js';
import { ToolsSection } from './tools.js';
import { TasksSection } from './tasks.js';
import { ActivitySection } from './activity.js';
import { EventsSection } from './events.js';
import { AuditSection } from './audit.js';

export interface Section {
  /** The path's last segment: /console/projects/{id}/{section}. */
  id: string;
  label: string;
  Component: ComponentType<{ projectId: string }>;
}

export const sections: readonly Section[] = [
  { id: 'overview', label: 'Overview', Component: OverviewSection },
  { id: 'keys', label: 'Keys', Component: KeysSection },
  { id: 'providers', label: 'Providers', Component: ProvidersSection },
  { id: 'playground', label: 'Playground', Component: PlaygroundSection },
  { id: 'sessions', label: 'Sessions', Component: SessionsSection },
  { id: 'documents', label: 'Documents', Component: DocumentsSection },
  { id: 'tools', label: 'Tools', Component: ToolsSection },
  { id: 'tasks', label: 'Tasks and triggers', Component: TasksSection },
  { id: 'activity', label: 'Turns and usage', Component: ActivitySection },
  { id: 'events', label: 'Events and deliveries', Component: EventsSection },
  { id: 'audit', label: 'Audit log', Component: AuditSection },
];
