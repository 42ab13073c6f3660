// Where tool families plug into the turn (DESIGN.md "Runs"): each feature that runs tools for a caller (documents,
// memory, tasks, the web, webhooks, MCP, the computer...) registers a family at the composition root, and a turn asks
// the registry for what every family offers this caller. The turn engine knows tools, never the families: a family
// that keeps something per turn (a sandbox it made on first use) is told when the turn's run ended, however it ended.
import type { EffectivePermission } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { RequestNarrowing, ServerTool, TurnTools } from './tools.js';

export type { TurnTools };

/** Who a turn (or a `GET /tools` listing) is for. */
export interface ToolCaller {
  principal: Principal;
  permission: EffectivePermission;
  request: RequestNarrowing;
  /** The conversation the turn continues (absent for a new one, and for listings such as GET /tools). */
  sessionId?: string | undefined;
}

/** What a family offers one turn: its tools, and what to do once the turn's run ended. */
export interface FamilyTools {
  tools: ServerTool[];
  /** Runs once the run ended (completed, paused, failed or cancelled); best effort, never delays the answer. */
  ended?: () => Promise<void>;
}

export interface ToolFamily {
  /** Named in logs when its end-of-turn work fails. */
  name: string;
  /** Its tools for this caller; the turn's permission arithmetic still decides which are offered. */
  forTurn(caller: ToolCaller): ServerTool[] | FamilyTools | Promise<ServerTool[] | FamilyTools>;
}

export class ToolRegistry {
  private readonly families: ToolFamily[] = [];

  /** Families are asked in registration order, which is the order their tools are offered in. */
  register(family: ToolFamily): void {
    if (this.families.some((known) => known.name === family.name)) throw new Error(`tool family '${family.name}' is registered twice`);
    this.families.push(family);
  }

  /**
   * One family after another, not all at once: families share cached reads (the skills' list serves both the skills
   * and the MCP family), and two asking at once on a cold cache would each make the statement a turn pays once.
   */
  async forTurn(caller: ToolCaller): Promise<TurnTools> {
    const turn: TurnTools = { tools: [], ended: [] };
    for (const family of this.families) {
      const offered = await family.forTurn(caller);
      const { tools, ended } = Array.isArray(offered) ? { tools: offered, ended: undefined } : offered;
      turn.tools.push(...tools);
      if (ended) turn.ended.push({ family: family.name, run: ended });
    }
    return turn;
  }
}
